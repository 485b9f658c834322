package admission

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/ident"
	"github.com/hotlimit/hotlimit/internal/wire"
)

// A KeyFunc appends to dst the identity request r is limited by, such as
// "tok:9f86d081884c7d659a2feaa0c55ad015" or "ip:2001:db8:1:2::/64", and
// returns the extended slice, or an error when r carries no such
// identity; the transport then refuses the request, or limits it by a
// fallback key (its Config.FallbackToIP), never letting it through
// unlimited. R is what a transport hands its key
// functions: an *http.Request for httplimit, the call's context.Context
// for grpclimit; both take this one type, so a key function is written
// once for each.
//
// It must append to dst, leaving dst's bytes as they were: a KeyFunc
// that changes dst's bytes, or returns a slice of its own that dst had
// room for (an "rl:v1:" key included, even one whose bytes are dst's and
// an identity), has its request refused with ErrBadKeyFunc
// (OutcomeKeyDenied), whatever the backend, a Local or a shared store.
//
// An identity is a short kind, a colon, and a value that cannot contain
// ":route:": the pipeline composes it with the group into keys such as
// "rl:v1:tenant:acme:route:search", and the format must keep one identity
// from forging another's key. The transports' key functions write "tok:"
// and "ip:" identities, and httplimit.ContextKey and grpclimit.FuncKey an
// application's own kind, normalised and escaped accordingly (IDs never
// hold a colon, IP addresses are printed by net/netip); a key function of
// your own must keep to that format.
type KeyFunc[R any] func(dst []byte, r R) ([]byte, error)

// Group configures a group of a Pipeline: requests that cost the same and
// share one quota per identity. How requests are put in groups (URL
// patterns, gRPC methods) is the transport's business.
type Group[R any] struct {
	// Name identifies the group in keys: letters, digits and "._-", at
	// most 64 bytes.
	Name string
	// Limit names the policy in Config.Limits this group's layer uses.
	// Required unless Exempt.
	Limit string
	// Cost is what one request costs in Limit; 0 means 1. New refuses a
	// Cost above the limit's capacity, unless Price is set.
	Cost int64
	// Price, if set, prices each request instead: called once per
	// request, after its key is extracted. An error or a cost below 0
	// refuses the request with OutcomeCostInvalid.
	Price func(R) (int64, error)
	// Exempt marks a group that is not limited at all.
	Exempt bool
}

// IdentityLayer is a layer keyed by an identity of its own, checked on
// every request of every limited group together with the group's layer
// and the global one, all or nothing: a per-IP limit next to a per-token
// one, a per-tenant one, in one decision.
type IdentityLayer[R any] struct {
	// Limit names its policy in Config.Limits. The RateLimit item of the
	// layer is named after it, so no other layer may use it.
	Limit string
	// Key extracts the identity the layer limits by; nil: the client
	// address, Config.ClientAddr's.
	Key KeyFunc[R]
	// Fallback, if set, extracts an identity when Key fails (the client
	// IP, say); nil: a request Key finds no identity in is refused
	// (OutcomeKeyDenied), never let through unlimited.
	Fallback KeyFunc[R]
	// Cost is what one request costs there; 0 means 1. New refuses a
	// Cost above the limit's capacity.
	Cost int64
}

// maxLayers is the most layers a Pipeline checks a request against: its
// group's, the global one and up to maxLayers−2 identity layers (see
// Config.Identities).
const maxLayers = 8

// Config configures a Pipeline. Limits, Groups and Key are required.
type Config[R any] struct {
	// Prefix starts every error New returns ("httplimit", "grpclimit"),
	// and Noun names what is limited in them ("request", "call").
	Prefix, Noun string
	// Limits are the named policies, passed to Backend. Names are
	// letters, digits and "._-", at most 64 bytes.
	Limits map[string]hotlimit.Policy
	// Groups are the groups; a transport names each request's group by
	// its index.
	Groups []Group[R]
	// Key extracts the identity a request is limited by in its group's
	// layer and the global one; nil: the client address, ClientAddr's.
	Key KeyFunc[R]
	// ClientAddr, if set, finds the address of the client a request came
	// from, grouped, as ClientIP.Prefix returns it: a nil Key, or an
	// identity layer's nil Key, limits by it, under the identity the
	// transports' client-IP key functions write ("ip:192.0.2.1",
	// "ip:2001:db8:1:2::/64"). The pipeline writes that identity's text
	// only into a shared store's keys: a Local's keys hold an IPv4
	// client's 4 bytes, taken from the address, where a KeyFunc's text
	// would be parsed back (see keys.go). Its error is a key function's.
	// Key or ClientAddr is required.
	ClientAddr func(R) (netip.Prefix, error)
	// Fallback, if set, extracts an identity when Key fails; nil: such a
	// request is refused (OutcomeKeyDenied).
	Fallback KeyFunc[R]
	// Global, if set, names a limit applied to every request's identity
	// on top of its group's, at GlobalCost (0 means 1).
	Global     string
	GlobalCost int64
	// Identities are further layers, each keyed by its own identity: at
	// most 6, so that a request is checked against at most 8 layers (its
	// group's, the global one and these).
	Identities []IdentityLayer[R]
	// ExemptIdentities lists identities (as Key writes them) that are
	// never limited (OutcomeExempt).
	ExemptIdentities []string
	// Backend builds the backend from Limits. nil: LocalBackend().
	Backend BackendFactory
	// FailOpen lets a request through (OutcomeErrorAllowed), without
	// rate-limit fields or metadata, when the backend cannot decide
	// (AllowStates returns an error: a shared store down, a timeout).
	// false, the default, fails closed: the request is refused
	// (OutcomeErrorDenied), without rate-limit fields or metadata. The
	// limit protects something, and when it cannot be checked the safe
	// answer is not to do the work. The transports answer that refusal as
	// unavailability (HTTP 503, gRPC Unavailable), not as a quota used
	// up: the client did nothing wrong and has no quota to wait for.
	FailOpen bool
	// DryRun decides and counts every request but lets it through:
	// OutcomeDryRunDenied for what would have been refused, also without
	// a key or a price; OutcomeErrorAllowed on a backend failure.
	DryRun bool
	// States asks the backend for every layer's own state (the states
	// of Backend.AllowStates), for what reports each layer (the RateLimit
	// field).
	States bool
	// Identify fills Result.IdentityHash and Result.IdentityKind.
	Identify bool
	// Observers see every decision the backend made or failed to make.
	// None may be nil, nor a nil pointer of an Observer type; New keeps
	// its own copy of the slice.
	Observers []Observer
}

// Pipeline is the decision every transport shares: it extracts a
// request's identities, builds its layers' keys, asks a Backend to admit
// it on every layer, all or nothing, and tells the transport what was
// decided, per layer, with nothing read apart from the decision. It is
// safe for concurrent use; create it with New and release its backend
// with Close.
type Pipeline[R any] struct {
	backend    Backend
	local      bool     // backend is a Local: keys in the in-process layout (keys.go)
	localGroup []uint64 // for a Local: its number of each group (Local.groupNumber)
	idPrefix   string   // what precedes an identity layer's identity in its key: "rl:v1:", or a Local's tagText
	states     bool     // ask the backend for the layers' states
	groups     []group[R]
	key        KeyFunc[R] // nil: addr's
	fallback   KeyFunc[R]
	addr       func(R) (netip.Prefix, error)
	global     *limitInfo
	globalCost int64
	ids        []identityLayer[R]
	exempt     map[string]struct{}
	failOpen   bool
	dryRun     bool
	identify   bool
	observers  []Observer
	seed       maphash.Seed
	kinds      ident.Kinds
	results    sync.Pool
}

// limitInfo is a named limit as Config.Limits describes it.
type limitInfo struct {
	name string
	lim  *hotlimit.Limiter // its limiter when the backend is a *Local (set once by New), else nil
	hotlimit.PolicyInfo
}

// group is a group's configuration, written only by New, and the
// RateLimit-Policy value of the policies its latest decisions were made
// under.
type group[R any] struct {
	name    string
	exempt  bool
	cost    int64
	price   func(R) (int64, error)
	limit   *limitInfo
	names   []string     // the layers' item names: the group's, the global one, the identities'
	infos   []*limitInfo // their limits, in the same order
	policy  []string     // the RateLimit-Policy value of Config.Limits
	live    atomic.Pointer[livePolicies]
	nlayers int // layers of a request of the group
	// The group layer's key is head, the identity, suffix; the identity
	// as its keys hold it starts at idFrom, the global layer's key at
	// globalFrom (keyLayout sets them for the backend's layout).
	head, suffix       string
	idFrom, globalFrom int
}

// identityLayer is an IdentityLayer, checked.
type identityLayer[R any] struct {
	limit    *limitInfo
	key      KeyFunc[R] // nil: Pipeline.addr's
	fallback KeyFunc[R]
	cost     int64
}

// New validates cfg, builds its backend, and returns the Pipeline. The
// error starts with cfg.Prefix and names the offending field.
func New[R any](cfg Config[R]) (*Pipeline[R], error) {
	pfx, noun := cfg.Prefix, cfg.Noun
	if pfx == "" {
		pfx = "admission"
	}
	if noun == "" {
		noun = "request"
	}
	if err := checkFields(pfx, &cfg); err != nil {
		return nil, err
	}
	p := &Pipeline[R]{
		key: cfg.Key, fallback: cfg.Fallback, addr: cfg.ClientAddr, globalCost: max(cfg.GlobalCost, 1),
		failOpen: cfg.FailOpen, dryRun: cfg.DryRun, identify: cfg.Identify, states: cfg.States,
		seed: maphash.MakeSeed(),
	}
	if len(cfg.Observers) > 0 {
		p.observers = slices.Clone(cfg.Observers) // the caller may reuse its slice
	}
	limits, err := namedLimits(pfx, cfg.Limits)
	if err != nil {
		return nil, err
	}
	if cfg.Global != "" {
		if p.global = limits[cfg.Global]; p.global == nil {
			return nil, fmt.Errorf("%s: Config.Global %q is not in Config.Limits", pfx, cfg.Global)
		}
	}
	if err := p.buildIdentities(pfx, &cfg, limits); err != nil {
		return nil, err
	}
	if err := p.buildGroups(pfx, cfg.Groups, limits); err != nil {
		return nil, err
	}
	if err := p.buildBackend(pfx, cfg.Backend, cfg.Limits, limits); err != nil {
		return nil, err
	}
	if len(cfg.ExemptIdentities) > 0 {
		p.exempt = make(map[string]struct{}, len(cfg.ExemptIdentities))
		for _, id := range cfg.ExemptIdentities {
			if p.local { // as Decide finds the identity in its keys
				id = string(appendLocalID(nil, []byte(id)))
			}
			p.exempt[id] = struct{}{}
		}
	}
	// Describe the policies the backend accepted, so that an invalid one
	// is reported by the backend, as such.
	if err := describeLimits(pfx, cfg.Limits, limits); err != nil {
		p.Close()
		return nil, err
	}
	p.describeGroups()
	if err := p.checkCosts(pfx, noun, cfg.Groups); err != nil {
		p.Close()
		return nil, err
	}
	p.results.New = func() any { return new(Result) }
	return p, nil
}

// checkFields validates the fields of cfg that need no other, in the
// order New reports them.
func checkFields[R any](pfx string, cfg *Config[R]) error {
	switch {
	case cfg.Key == nil && cfg.ClientAddr == nil:
		return fmt.Errorf("%s: Config.Key is required", pfx)
	case len(cfg.Groups) == 0:
		return fmt.Errorf("%s: Config.Groups is empty", pfx)
	case len(cfg.Limits) == 0:
		return fmt.Errorf("%s: Config.Limits is empty", pfx)
	case cfg.GlobalCost < 0:
		return fmt.Errorf("%s: Config.GlobalCost must be ≥ 0, got %d", pfx, cfg.GlobalCost)
	case len(cfg.Identities) > maxLayers-2:
		return fmt.Errorf("%s: Config.Identities has %d layers, at most %d", pfx, len(cfg.Identities), maxLayers-2)
	}
	for i, o := range cfg.Observers {
		if o == nil {
			return fmt.Errorf("%s: Config.Observers[%d] is nil", pfx, i)
		}
		if isNil(o) {
			return fmt.Errorf("%s: Config.Observers[%d] is a nil %T", pfx, i, o)
		}
	}
	return nil
}

// buildIdentities checks cfg's identity layers against limits and the
// other layers' limits, and sets p.ids.
func (p *Pipeline[R]) buildIdentities(pfx string, cfg *Config[R], limits map[string]*limitInfo) error {
	used := map[string]bool{cfg.Global: true}
	for _, g := range cfg.Groups {
		used[g.Limit] = true
	}
	for i, id := range cfg.Identities {
		li := limits[id.Limit]
		switch {
		case li == nil:
			return fmt.Errorf("%s: Config.Identities[%d]: Limit %q is not in Config.Limits", pfx, i, id.Limit)
		case used[id.Limit]:
			return fmt.Errorf("%s: Config.Identities[%d]: Limit %q is used by another layer; an identity layer needs a limit of its own (its RateLimit item is named after it)", pfx, i, id.Limit)
		case id.Key == nil && cfg.ClientAddr == nil:
			return fmt.Errorf("%s: Config.Identities[%d]: Key is required", pfx, i)
		case id.Cost < 0:
			return fmt.Errorf("%s: Config.Identities[%d]: Cost must be ≥ 0, got %d", pfx, i, id.Cost)
		}
		used[id.Limit] = true
		p.ids = append(p.ids, identityLayer[R]{limit: li, key: id.Key, fallback: id.Fallback, cost: max(id.Cost, 1)})
	}
	return nil
}

// namedLimits checks every limit's name, in name order so that the first
// error is the same on every run, and returns an undescribed limitInfo
// for each.
func namedLimits(pfx string, limits map[string]hotlimit.Policy) (map[string]*limitInfo, error) {
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, name)
	}
	sort.Strings(names)
	infos := make(map[string]*limitInfo, len(limits))
	for _, name := range names {
		if !ident.ValidName(name) {
			return nil, fmt.Errorf("%s: Config.Limits: name %q must be 1 to 64 letters, digits or \"._-\"", pfx, name)
		}
		if limits[name] == nil {
			return nil, fmt.Errorf("%s: limit %q: unsupported policy type <nil>", pfx, name)
		}
		infos[name] = &limitInfo{name: name}
	}
	return infos, nil
}

// describeLimits describes every limit's policy into infos.
func describeLimits(pfx string, limits map[string]hotlimit.Policy, infos map[string]*limitInfo) error {
	for _, li := range infos {
		pi, err := hotlimit.Describe(limits[li.name])
		if err != nil {
			return fmt.Errorf("%s: limit %q: %w", pfx, li.name, err)
		}
		li.PolicyInfo = pi
	}
	return nil
}

// globalSuffix tells the global layer's item from the group's when both
// use the same limit. "/" is not allowed in a limit's name, so the
// suffixed name never names another limit.
const globalSuffix = "/global"

// buildGroups checks the groups and lays out each one's layers.
func (p *Pipeline[R]) buildGroups(pfx string, groups []Group[R], limits map[string]*limitInfo) error {
	p.groups = make([]group[R], len(groups))
	seen := make(map[string]bool, len(groups))
	for i, g := range groups {
		gs := &p.groups[i]
		switch {
		case !ident.ValidName(g.Name):
			return fmt.Errorf("%s: Config.Groups[%d]: name %q must be 1 to 64 letters, digits or \"._-\"", pfx, i, g.Name)
		case seen[g.Name]:
			return fmt.Errorf("%s: Config.Groups[%d]: duplicate group %q", pfx, i, g.Name)
		case g.Cost < 0:
			return fmt.Errorf("%s: group %q: Cost must be ≥ 0, got %d", pfx, g.Name, g.Cost)
		}
		seen[g.Name] = true
		gs.name, gs.exempt, gs.cost, gs.price = g.Name, g.Exempt, max(g.Cost, 1), g.Price
		if g.Exempt {
			continue
		}
		if gs.limit = limits[g.Limit]; gs.limit == nil {
			return fmt.Errorf("%s: group %q: Limit %q is not in Config.Limits", pfx, g.Name, g.Limit)
		}
		gs.names, gs.infos = []string{gs.limit.name}, []*limitInfo{gs.limit}
		if p.global != nil {
			name := p.global.name
			if name == gs.limit.name {
				name += globalSuffix
			}
			gs.names, gs.infos = append(gs.names, name), append(gs.infos, p.global)
		}
		for _, id := range p.ids {
			gs.names, gs.infos = append(gs.names, id.limit.name), append(gs.infos, id.limit)
		}
		gs.nlayers = len(gs.names)
	}
	return nil
}

// describeGroups sets each limited group's RateLimit-Policy value of
// Config.Limits; the limits must be described.
func (p *Pipeline[R]) describeGroups() {
	for i := range p.groups {
		gs := &p.groups[i]
		if gs.exempt {
			continue
		}
		live := &livePolicies{infos: make([]hotlimit.PolicyInfo, gs.nlayers)}
		var v strings.Builder
		for j, li := range gs.infos {
			if j > 0 {
				v.WriteString(", ")
			}
			v.WriteString(wire.PolicyItem(gs.names[j], li.PolicyInfo))
			live.infos[j] = li.PolicyInfo
		}
		gs.policy = []string{v.String()}
		live.value = gs.policy
		gs.live.Store(live)
	}
}

// buildBackend builds the backend from limits with factory (Local when
// nil), naming Config.Backend in its error. With a *Local, it resolves
// each of infos' limiters once, for Decide to hand the Local in its
// layers rather than their names to look up per decision.
func (p *Pipeline[R]) buildBackend(pfx string, factory BackendFactory, limits map[string]hotlimit.Policy, infos map[string]*limitInfo) error {
	if factory == nil {
		factory = LocalBackend()
	}
	b, err := factory(limits)
	if err != nil {
		if !strings.HasPrefix(err.Error(), pfx+": ") {
			err = fmt.Errorf("%s: Config.Backend: %w", pfx, err)
		}
		return err
	}
	if b == nil {
		return fmt.Errorf("%s: Config.Backend returned a nil Backend", pfx)
	}
	l, local := b.(*Local)
	if (local && l == nil) || (!local && isNil(b)) {
		return fmt.Errorf("%s: Config.Backend returned a nil %T as its Backend", pfx, b)
	}
	p.backend = b
	if local {
		p.local = true
		p.localGroup = make([]uint64, len(p.groups))
		for i := range p.groups {
			p.localGroup[i] = l.groupNumber(p.groups[i].name)
		}
		for _, li := range infos {
			li.lim = l.limiter(li.name)
		}
	}
	p.keyLayout()
	return nil
}

// keyLayout sets what Decide writes around the identities in the keys of
// the backend's layout: ident.LayerKey's for a shared store, the
// in-process one for a Local (keys.go).
func (p *Pipeline[R]) keyLayout() {
	p.idPrefix = ident.KeyPrefix
	if p.local {
		p.idPrefix = string(rune(tagText))
	}
	for i := range p.groups {
		g := &p.groups[i]
		if !p.local {
			g.head, g.suffix, g.idFrom, g.globalFrom = ident.KeyPrefix, ":route:"+g.name, len(ident.KeyPrefix), 0
			continue
		}
		head := localHead(p.localGroup[i])
		g.head, g.suffix, g.idFrom, g.globalFrom = string(append(head, tagText)), "", len(head), len(head)
	}
}

// isNil reports whether v, a non-nil interface value, holds a nil
// pointer, func, map or channel: a typed nil, whose methods would panic
// on the first request. New alone calls it; the hot path never does.
func isNil(v any) bool {
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Chan, reflect.UnsafePointer:
		return r.IsNil()
	}
	return false
}

// checkCosts refuses a fixed cost above its limit's capacity (the largest
// cost each algorithm can ever admit): every request it prices would be
// refused for good.
func (p *Pipeline[R]) checkCosts(pfx, noun string, groups []Group[R]) error {
	for i, g := range groups {
		gs := &p.groups[i]
		if !gs.exempt && g.Price == nil && gs.cost > gs.limit.Limit {
			return fmt.Errorf("%s: group %q: Cost %d is above limit %q's capacity %d: no %s could ever pass", pfx, g.Name, gs.cost, g.Limit, gs.limit.Limit, noun)
		}
	}
	if p.global != nil && p.globalCost > p.global.Limit {
		return fmt.Errorf("%s: Config.GlobalCost %d is above limit %q's capacity %d: no %s could ever pass", pfx, p.globalCost, p.global.name, p.global.Limit, noun)
	}
	for i, id := range p.ids {
		if id.cost > id.limit.Limit {
			return fmt.Errorf("%s: Config.Identities[%d]: Cost %d is above limit %q's capacity %d: no %s could ever pass", pfx, i, id.cost, id.limit.name, id.limit.Limit, noun)
		}
	}
	return nil
}

// Backend returns the backend the pipeline decides through.
func (p *Pipeline[R]) Backend() Backend { return p.backend }

// Close closes the backend.
func (p *Pipeline[R]) Close() error { return p.backend.Close() }

// Reset returns every layer identity is limited by (its layer in each
// group, the global one, and the identity layers, which are keyed by the
// identity alone) to a fresh state. It returns the first error of the
// backend, after trying every layer.
func (p *Pipeline[R]) Reset(ctx context.Context, identity string) error {
	var first error
	reset := func(limit, key string) {
		if err := p.backend.Reset(ctx, limit, key); err != nil && first == nil {
			first = err
		}
	}
	for i := range p.groups {
		if g := &p.groups[i]; !g.exempt {
			reset(g.limit.name, p.layerKey(identity, i))
		}
	}
	if p.global != nil {
		reset(p.global.name, p.layerKey(identity, -1))
	}
	for _, id := range p.ids {
		reset(id.limit.name, p.layerKey(identity, -1))
	}
	return first
}

// LayerKey returns the key the pipeline gives its backend for identity's
// layer in the named group, or, for group "", for its global and
// identity layers: for a Local backend the in-process layout's (see
// keys.go: shorter, and meaningless outside the pipeline), for any other
// "rl:v1:" + identity + ":route:" + group ("rl:v1:" + identity for
// group ""). It returns "" for a group the pipeline does
// not have. Use it to inspect or refund a client's state in the backend.
func (p *Pipeline[R]) LayerKey(identity, group string) string {
	if group == "" {
		return p.layerKey(identity, -1)
	}
	for i := range p.groups {
		if p.groups[i].name == group {
			return p.layerKey(identity, i)
		}
	}
	return ""
}

// layerKey is LayerKey of group index i, or of no group for i < 0.
func (p *Pipeline[R]) layerKey(identity string, i int) string {
	if !p.local {
		name := ""
		if i >= 0 {
			name = p.groups[i].name
		}
		return ident.LayerKey(identity, name)
	}
	var key []byte
	if i >= 0 {
		key = localHead(p.localGroup[i])
	}
	return string(appendLocalID(key, []byte(identity)))
}

// ErrBadKeyFunc is the Result.Err of a request whose KeyFunc returned no
// identity appended to its dst: a broken KeyFunc refuses, never admits.
var ErrBadKeyFunc = errors.New("admission: KeyFunc returned no identity appended to dst")
