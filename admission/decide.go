package admission

import (
	"context"
	"hash/maphash"
	"strconv"
	"time"
	"unsafe"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/ident"
	"github.com/hotlimit/hotlimit/internal/wire"
)

// Outcome is what a Pipeline decided for one request. A transport maps it
// to its own outcomes and answers.
type Outcome uint8

// The outcomes.
const (
	OutcomeAllowed      Outcome = iota // the backend admitted it
	OutcomeDenied                      // the backend denied it for now: it may pass later
	OutcomeDeniedNever                 // the backend denied it for good: RetryAfter is hotlimit.Never
	OutcomeExempt                      // an exempt group or identity: not limited
	OutcomeKeyDenied                   // no key could be extracted: refused
	OutcomeErrorAllowed                // the backend failed, and Config.FailOpen (or DryRun) let it through
	OutcomeErrorDenied                 // the backend failed: refused
	OutcomeCostInvalid                 // the group's Price failed or priced it below 0: refused
	OutcomeDryRunDenied                // DryRun let through what would have been refused
	outcomeCount                       // the number of outcomes: len(GroupCounts{}.Counts)
)

var outcomeNames = [outcomeCount]string{"allowed", "denied", "denied_never", "exempt", "key_denied", "error_allowed", "error_denied", "cost_invalid", "dry_run_denied"}

// String returns the outcome's snake_case name, as metrics and logs
// label it.
func (o Outcome) String() string {
	if o < outcomeCount {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// GroupCounts are one group's request counts by Outcome, as a transport
// counts them (httplimit's Middleware.Counts) and promlimit exports them.
// Counts has one element per Outcome, indexed by it: its length,
// len(GroupCounts{}.Counts), a constant, is the number of outcomes.
type GroupCounts struct {
	Group  string
	Counts [outcomeCount]uint64 // indexed by Outcome
}

// Passed reports whether the request goes on to its handler: admitted,
// exempt, let through by Config.FailOpen or by DryRun.
func (o Outcome) Passed() bool {
	return o == OutcomeAllowed || o == OutcomeExempt || o == OutcomeErrorAllowed || o == OutcomeDryRunDenied
}

// Result is what a Pipeline decided for one request, and what it knows of
// each layer the request was checked against, all from the decision. Get
// one from Decide and hand it back with Release once the response is
// written: it holds the request's keys.
type Result struct {
	Outcome Outcome
	// Refusal is what refused the request (OutcomeDenied,
	// OutcomeDeniedNever, OutcomeKeyDenied or OutcomeCostInvalid), or,
	// under DryRun (OutcomeDryRunDenied), what would have; OutcomeAllowed
	// for a request nothing refused (a backend failure included).
	Refusal Outcome
	// Decision is the backend's decision (zero when there was none).
	Decision hotlimit.Decision
	// Err is the key extraction, pricing or backend error, if any; KeyErr
	// is the first error of a key function (Config.Key's or an identity
	// layer's), before any fallback.
	Err, KeyErr error
	// Fallback reports that a layer's key came from its Fallback.
	Fallback bool
	// Missing names the layer whose identity could not be extracted, by
	// its item name (see Item), never by the identity: for
	// OutcomeKeyDenied (and its DryRun), the group's layer when
	// Config.Key (and its Fallback) found none, an identity layer's when
	// its Key (and Fallback) found none; "" otherwise.
	Missing string
	// IdentityHash and IdentityKind describe the request's identity (Key's
	// or its fallback's) with Config.Identify: a seeded 64-bit hash,
	// meaningless outside the pipeline, and its kind ("tok", "ip", ...),
	// at most 32 distinct kinds, then "other". 0 and "" without a key.
	IdentityHash uint64
	IdentityKind string
	// Binding is the index of the layer the Decision describes (the one
	// that refused the request, or the one with the fewest requests
	// left), -1 without a decision. BindingReported is false when the
	// backend could not tell it (AllowStates returned -1): Binding is
	// then the first layer whose capacity is Decision.Limit, a guess.
	Binding         int
	BindingReported bool
	// Cost is what the request cost in its group's layer.
	Cost int64

	buf     [maxKeyBuf]byte
	layers  [maxLayers]Layer
	states  [maxLayers]hotlimit.LayerState // what the backend reported of each layer
	nlayers int                            // layers decided; 0 when no backend was asked
	nstates int                            // states the backend reported: nlayers or 0
	built   int                            // layers whose keys were written: cleared by Release
	ownKeys bool                           // their keys are views of buf (Pipeline.keyString): nothing to clear
	ev      Event                          // what the observers are handed: here, so it does not escape per request
	group   string                         // the request's group
	glimit  *limitInfo                     // its layer's limit; nil for an exempt group
	took    time.Duration                  // how long the backend took, when observed
	names   []string
	infos   []*limitInfo
}

// maxKeyBuf is the length of the keys a Pipeline builds without growing
// its buffer.
const maxKeyBuf = 256

// Layers returns the number of layers the backend decided the request
// on: 0 when it was not asked (an exempt request, a key, price or backend
// failure).
func (res *Result) Layers() int { return res.nlayers }

// Item describes layer i of a decided request (i < Layers()).
type Item struct {
	// Name is the layer's RateLimit item name: its limit's name (the
	// global layer's suffixed "/global" when its group uses the same
	// limit).
	Name string
	// Cost is what the request costs in the layer.
	Cost int64
	// Remaining and Window are the layer's own state after the decision:
	// hotlimit.LayerState's Decision.Remaining and Next. Known is true
	// for every layer or for none: false when the backend did not report
	// every layer's state (Config.States unset, or a layer it could not
	// tell), and then only the binding layer's Remaining, the Decision's,
	// is known.
	Remaining int64
	Window    time.Duration
	Known     bool
	// Policy describes the policy the layer was decided under, or, when
	// the backend does not say, the one Config.Limits gives it.
	Policy hotlimit.PolicyInfo
}

// Item returns layer i's Item.
func (res *Result) Item(i int) Item {
	it := Item{Name: res.names[i], Cost: res.layers[i].Cost, Policy: res.infos[i].PolicyInfo}
	if i < res.nstates {
		st := &res.states[i]
		it.Remaining, it.Window, it.Known = st.Decision.Remaining, st.Next, true
		if st.Policy.Algorithm != 0 {
			it.Policy = st.Policy
		}
	} else if i == res.Binding {
		it.Remaining = res.Decision.Remaining
	}
	return it
}

// Limit returns the binding layer's limit name and its algorithm ("" when
// there was no decision or the backend does not say which layer bound),
// the algorithm being that of the policy the decision was made under.
func (res *Result) Limit() (name, algorithm string) {
	i := res.Binding
	if !res.BindingReported || i < 0 || i >= res.nlayers {
		return "", "" // Binding is the pipeline's guess, not the backend's word
	}
	alg := res.infos[i].Algorithm
	if i < res.nstates && res.states[i].Policy.Algorithm != 0 {
		alg = res.states[i].Policy.Algorithm
	}
	return res.infos[i].name, alg.String()
}

// livePolicies is a RateLimit-Policy value and the policies it describes.
type livePolicies struct {
	infos []hotlimit.PolicyInfo
	value []string
}

// Release hands res back to p. res must not be used afterwards.
func (p *Pipeline[R]) Release(res *Result) {
	if !res.ownKeys {
		clear(res.layers[:res.built]) // keep no key alive in the pool (states hold no pointers)
	}
	res.Err, res.KeyErr, res.built = nil, nil, 0
	p.results.Put(res)
}

// PolicyValue returns the RateLimit-Policy value of res's layers: one
// item per layer, "name";q=…;w=… (see wire.PolicyItem), describing the policy
// each was decided under. The slice is shared by every response decided
// under the same policies: a caller may replace it or append to it, which
// copies, but must not write into its elements.
func (p *Pipeline[R]) PolicyValue(res *Result, groupIdx int) []string {
	g := &p.groups[groupIdx]
	cur := g.live.Load()
	changed := false
	for i := range res.nstates {
		if pi := &res.states[i].Policy; pi.Algorithm != 0 && !sameQuota(pi, &cur.infos[i]) {
			changed = true
		}
	}
	if !changed {
		return cur.value
	}
	infos := append([]hotlimit.PolicyInfo(nil), cur.infos...)
	v := ""
	for i := range infos {
		if i < res.nstates && res.states[i].Policy.Algorithm != 0 {
			infos[i] = res.states[i].Policy
		}
		if i > 0 {
			v += ", "
		}
		v += wire.PolicyItem(g.names[i], infos[i])
	}
	next := &livePolicies{infos: infos, value: []string{v}}
	g.live.Store(next) // racing stores each hold a value true of some decision
	return next.value
}

// sameQuota reports whether a and b have the same RateLimit-Policy item:
// the same q (Limit) and w (Window, or Rate with Limit). Comparing these
// words is cheaper than comparing whole PolicyInfos on every request.
func sameQuota(a, b *hotlimit.PolicyInfo) bool {
	return a.Limit == b.Limit && a.Window == b.Window && a.Rate == b.Rate
}

// Decide decides request r of group groupIdx (an index in Config.Groups)
// at cost (used unless the group has a Price) and returns the Result,
// which the caller hands back with Release.
func (p *Pipeline[R]) Decide(ctx context.Context, r R, groupIdx int, cost int64) *Result {
	res := p.results.Get().(*Result)
	res.Outcome, res.Refusal, res.Decision, res.Fallback = OutcomeAllowed, OutcomeAllowed, hotlimit.Decision{}, false
	res.IdentityHash, res.IdentityKind, res.Binding, res.BindingReported, res.Cost, res.Missing = 0, "", -1, false, 0, ""
	res.nlayers, res.nstates, res.took = 0, 0, 0
	g := &p.groups[groupIdx]
	res.group, res.glimit, res.names, res.infos = g.name, g.limit, g.names, g.infos // names and infos: nil for an exempt group
	if g.exempt {
		res.Outcome = OutcomeExempt
		return res
	}
	// The keys are written in the backend's layout, chosen at New (see
	// keys.go): g.head, the identity and g.suffix make the group layer's
	// key; the identity's own key (the global layer's) starts at
	// g.idFrom; each identity layer's is p.idPrefix and its identity.
	key, err := p.groupKey(res, r, g.head)
	if err != nil {
		res.Missing = g.names[0]
		return p.refused(res, OutcomeKeyDenied, err)
	}
	idEnd := len(key)
	if (p.identify || p.exempt != nil) && p.identifies(res, key[g.idFrom:idEnd]) {
		res.Outcome = OutcomeExempt
		return res
	}
	if g.price != nil {
		if cost, err = g.price(r); err == nil && cost < 0 {
			err = errNegativeCost{cost}
		}
		if err != nil {
			return p.refused(res, OutcomeCostInvalid, err)
		}
	}
	res.Cost = cost
	if len(g.suffix) > 0 {
		key = append(key, g.suffix...)
	}
	groupEnd := len(key)
	var ends [maxLayers]int // where each identity layer's key ends in key
	if len(p.ids) > 0 {
		if key, err = p.identityLayers(res, key, r, &ends); err != nil {
			return p.refused(res, OutcomeKeyDenied, err)
		}
	}
	all := p.keyString(res, key)
	layers := res.layers[:g.nlayers] // the group's, the global one, the identities'
	layers[0] = Layer{Limit: g.limit.name, Key: all[:groupEnd], Cost: cost, lim: g.limit.lim}
	n := 1
	if p.global != nil {
		layers[1] = Layer{Limit: p.global.name, Key: all[g.globalFrom:idEnd], Cost: p.globalCost, lim: p.global.lim}
		n = 2
	}
	start := groupEnd
	for i := range p.ids {
		il := &p.ids[i]
		layers[n+i] = Layer{Limit: il.limit.name, Key: all[start:ends[i]], Cost: il.cost, lim: il.limit.lim}
		start = ends[i]
	}
	res.nlayers, res.built = len(layers), len(layers)
	var began time.Time
	if p.observers != nil {
		ctx = p.begin(ctx, res)
		began = time.Now()
	}
	idx := -1
	var d hotlimit.Decision
	if p.states {
		states := res.states[:len(layers)]
		d, idx, err = p.backend.AllowStates(ctx, layers, states)
		if err == nil {
			res.nstates = len(layers)
			for i := range states {
				if states[i].Decision.Remaining < 0 {
					res.nstates = 0 // the backend could not tell them all
				}
			}
		}
	} else {
		d, idx, err = p.backend.AllowStates(ctx, layers, nil)
	}
	if err != nil {
		res.nlayers, res.nstates, res.Err = 0, 0, err // nothing was decided
		res.Outcome = OutcomeErrorDenied
		if p.failOpen || p.dryRun {
			res.Outcome = OutcomeErrorAllowed
		}
		p.observe(ctx, res, began)
		return res
	}
	res.Decision, res.Binding, res.BindingReported = d, binding(res, d, idx), idx >= 0 && idx < res.nlayers
	res.Outcome, res.Refusal = outcomeOf(d, p.dryRun)
	if p.observers != nil {
		p.observe(ctx, res, began)
	}
	return res
}

// outcomeOf is the Outcome of a decision the backend made, and its
// Refusal.
func outcomeOf(d hotlimit.Decision, dryRun bool) (o, refusal Outcome) {
	switch {
	case d.Allowed:
		return OutcomeAllowed, OutcomeAllowed
	case d.RetryAfter == hotlimit.Never:
		refusal = OutcomeDeniedNever
	default:
		refusal = OutcomeDenied
	}
	if dryRun {
		return OutcomeDryRunDenied, refusal
	}
	return refusal, refusal
}

// keyString returns the request's keys as a string: a copy, the one
// allocation of a decision, for a backend that may keep them; for a
// Local, a view of res.buf, which hotlimit copies from (as it does the
// bytes of AllowBytes) into its slots or arena and keeps nothing of. The
// view lives in res.layers until Release clears them, before res.buf is
// written again.
func (p *Pipeline[R]) keyString(res *Result, key []byte) string {
	// A view of res.buf keeps nothing alive that res does not: Release
	// need not clear it (a key function may have grown key elsewhere).
	res.ownKeys = p.local && unsafe.SliceData(key) == &res.buf[0]
	if p.local {
		return unsafe.String(unsafe.SliceData(key), len(key))
	}
	return string(key)
}

// groupKey returns head and the request's identity, from Config.Key or,
// when it fails, its Fallback, and sets res.KeyErr and res.Fallback.
func (p *Pipeline[R]) groupKey(res *Result, r R, head string) ([]byte, error) {
	key, err := p.appendKey(p.key, res.buf[:0], head, r)
	res.KeyErr = err
	if err != nil && p.fallback != nil {
		res.Fallback = true
		key, err = p.appendKey(p.fallback, res.buf[:0], head, r)
	}
	return key, err
}

// identityLayers appends each identity layer's key (p.idPrefix and its
// identity, in the backend's layout) to key, recording where each ends
// in ends, and sets res.KeyErr (unless set), res.Fallback and, on a
// failure, res.Missing. It returns the first error no fallback answered.
func (p *Pipeline[R]) identityLayers(res *Result, key []byte, r R, ends *[maxLayers]int) ([]byte, error) {
	for i := range p.ids {
		il := &p.ids[i]
		k, err := p.appendKey(il.key, key, p.idPrefix, r)
		if err != nil && res.KeyErr == nil {
			res.KeyErr = err
		}
		if err != nil && il.fallback != nil {
			res.Fallback = true
			k, err = p.appendKey(il.fallback, key, p.idPrefix, r)
		}
		if err != nil {
			res.Missing = res.names[len(res.names)-len(p.ids)+i] // the group's, the global one, the identities'
			return key, err
		}
		key, ends[i] = k, len(k)
	}
	return key, nil
}

// appendKey appends to prev head and the identity key writes of r (for
// a nil key, the client address p.addr finds), in the backend's layout:
// for a Local, an IPv4 client's as its 5 bytes (keys.go). It refuses
// what a KeyFunc returned that is not prev, head and an identity:
// a KeyFunc that ignored dst must not replace the keys built before it.
func (p *Pipeline[R]) appendKey(key KeyFunc[R], prev []byte, head string, r R) ([]byte, error) {
	if key == nil {
		return p.appendAddr(prev, head, r)
	}
	dst := append(prev, head...)
	k, err := key(dst, r)
	if err != nil {
		return prev, err
	}
	// An append that dst had room for returns dst's array: a slice of the
	// KeyFunc's own is refused even when its bytes are dst's and an
	// identity (an "rl:v1:" key, as a shared store's group layer's dst is
	// "rl:v1:"), as it is in a Local's layout, which no such bytes match.
	if !appended(k, prev, head) || (len(k) <= cap(dst) && unsafe.SliceData(k) != unsafe.SliceData(dst)) {
		return prev, ErrBadKeyFunc
	}
	if p.local {
		k = localize(k, len(prev)+len(head)-1)
	}
	return k, nil
}

// appended reports whether k, what a KeyFunc returned for dst = prev +
// head, is prev, head and an identity.
func appended(k, prev []byte, head string) bool {
	n := len(prev) + len(head)
	if len(k) <= n {
		return false
	}
	// prev: its own bytes, unless k is another slice (a shared array's
	// bytes are prev's: so compared, they were equal too)
	if len(prev) > 0 && unsafe.SliceData(k) != unsafe.SliceData(prev) && string(k[:len(prev)]) != string(prev) {
		return false
	}
	for i := 0; i < len(head); i++ { // a few bytes: cheaper than a call to compare them
		if k[len(prev)+i] != head[i] {
			return false
		}
	}
	return true
}

// appendAddr appends to prev head and the identity of the client address
// p.addr finds for r: for a Local, an ungrouped IPv4 client's as tagIPv4
// and its 4 bytes, in place of head's tagText, with no text between;
// else its text, as ident.AppendIP writes it.
func (p *Pipeline[R]) appendAddr(prev []byte, head string, r R) ([]byte, error) {
	pfx, err := p.addr(r)
	if err == nil && !pfx.IsValid() {
		err = ErrNoClientIP
	}
	if err != nil {
		return prev, err
	}
	if a := pfx.Addr(); p.local && a.Is4() && pfx.Bits() == 32 {
		b := a.As4()
		return append(append(prev, head[:len(head)-1]...), tagIPv4, b[0], b[1], b[2], b[3]), nil
	}
	return ident.AppendIP(append(prev, head...), pfx), nil
}

// identifies sets res.IdentityHash and res.IdentityKind from id, the
// request's identity as its keys hold it (the text after "rl:v1:", or a
// Local's in-process form: keys.go), when the pipeline identifies
// requests, and reports whether id is exempt (p.exempt holds the exempt
// identities in the same form).
func (p *Pipeline[R]) identifies(res *Result, id []byte) bool {
	if p.identify {
		res.IdentityHash = maphash.Bytes(p.seed, id)
		switch {
		case !p.local:
			res.IdentityKind = p.kinds.Of(id)
		case id[0] == tagIPv4:
			res.IdentityKind = p.kinds.Of(ipKind)
		default:
			res.IdentityKind = p.kinds.Of(id[1:])
		}
	}
	_, ok := p.exempt[string(id)]
	return ok
}

// ipKind is what Kinds.Of reads the kind of a Local's compact IPv4
// identity from.
var ipKind = []byte("ip:")

// refused completes res for a request refused before the backend was
// asked, as DryRun has it: let through, as OutcomeDryRunDenied.
func (p *Pipeline[R]) refused(res *Result, o Outcome, err error) *Result {
	res.Outcome, res.Refusal, res.Err = o, o, err
	if p.dryRun {
		res.Outcome = OutcomeDryRunDenied // it would have been refused
	}
	return res
}

// binding returns the index of the layer d describes: idx when the
// backend reported it, else the first layer whose capacity is d.Limit.
func binding(res *Result, d hotlimit.Decision, idx int) int {
	if idx >= 0 && idx < res.nlayers {
		return idx
	}
	for i := range res.nlayers {
		if res.infos[i].Limit == d.Limit {
			return i
		}
	}
	return 0
}

// errNegativeCost is the error of a Price below 0.
type errNegativeCost struct{ cost int64 }

func (e errNegativeCost) Error() string {
	return "admission: Price returned a negative cost, " + strconv.FormatInt(e.cost, 10)
}
