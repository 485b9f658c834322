package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/repeat"
	"github.com/redis/go-redis/v9"
)

// Layer is one limit of a layered check: a limiter, the key it limits the
// request by, and the request's cost there. See AllowLayers.
type Layer struct {
	Limiter *Limiter
	Key     string
	Cost    int64
}

// ErrMixedLayers is wrapped by the error AllowLayers returns, with a
// denial and before any round trip, for layers that cannot be one call:
// their limiters use different clients (one script cannot span two
// servers), or some are in lease mode (WithLeases) and others decide on
// Redis (one call cannot be both all in process and one script).
var ErrMixedLayers = errors.New("redislimit: the layers cannot be decided in one call")

// The errors AllowLayers returns for mixed layers.
var (
	errMixedClients = fmt.Errorf("%w: their limiters use different clients", ErrMixedLayers)
	errMixedModes   = fmt.Errorf("%w: they mix limiters in lease mode with limiters that decide on Redis", ErrMixedLayers)
)

// AllowLayers admits a request only if every layer admits it, all or
// nothing, in one script call: either every layer consumes its cost or
// none does. Unlike hotlimit.AllowLayers nothing is consumed even for an
// instant, since the script decides every layer before it writes. The
// Decision is that of hotlimit.AllowLayers: it reports the binding
// layer's Remaining and Limit and the largest ResetAfter. Allowed, the
// binding layer is the one with the fewest requests of its cost left
// (⌊Remaining/Cost⌋, ties to the smaller Remaining); denied, it is the
// one with the largest RetryAfter among the layers that deny, each layer
// checked on its state as it was. A layer with a nil Limiter, or a key
// longer than hotlimit.MaxKeyLen, denies with RetryAfter = Never without
// a call, and so do no layers; the Decision then describes that layer
// alone (Remaining 0, ResetAfter 0), the others not being read, where
// hotlimit.AllowLayers reports the largest ResetAfter of all. A limiter and key that appear in several
// layers are one limit, decided once for the sum of their costs, as
// hotlimit.AllowLayers decides them.
//
// Every limiter must use the same client (else ErrMixedLayers). The call
// takes the smallest of their timeouts and goes through the circuit of
// the keys' node in each of their breakers. When Redis does not decide,
// each layer's failure policy applies: a layer that fails closed (the
// default) denies the request; otherwise the WithFallbackLocal layers
// decide locally, and WithFailOpen layers are skipped; the error wraps
// ErrUnavailable and the cause. On a Redis Cluster the keys
// must share a slot (see WithHashTag): a call whose keys do not fails
// with ErrCrossSlot and a denial, before any round trip.
func AllowLayers(ctx context.Context, layers ...Layer) (hotlimit.Decision, error) {
	d, _, err := allowLayers(ctx, layers, nil)
	return d, err
}

// AllowLayersState is AllowLayers that also returns the index of the
// binding layer, the one whose Limit and Remaining the Decision reports,
// as hotlimit.AllowLayersState does (-1 for no layers or mixed clients;
// when Redis does not decide, the layer that failed closed and denied,
// the binding layer among the WithFallbackLocal ones, or 0 when only
// WithFailOpen layers were left), and sets states[i] to layer i's state
// after the decision, in the same script call, as
// RedisBackend.AllowStates reports it: Remaining is the layer's own, and
// Window the wait for one unit more on that same state (in lease mode,
// Remaining is what the layer's lease holds and Window is
// hotlimit.Never). Every state is unknown (Remaining -1) when a cached
// denial (WithLocalDenials) answered or Redis did not decide. A layer
// with a nil Limiter or a key longer than hotlimit.MaxKeyLen, refused
// without a call, reports what hotlimit.AllowLayersState does of it
// (Remaining 0, Window hotlimit.Never: no unit ever comes back), and
// every other layer, not read, is unknown. It is for
// callers that hold their limiters themselves (a set of limits that
// changes at runtime) rather than in a RedisBackend. A nil states reads
// none. A states of another length than layers never panics: the call is
// decided with states for every layer, states receives those of its
// first layers, and any element beyond the layers is unknown.
func AllowLayersState(ctx context.Context, states []hotlimit.LayerState, layers ...Layer) (hotlimit.Decision, int, error) {
	if states != nil && len(states) != len(layers) {
		own := make([]hotlimit.LayerState, len(layers))
		d, i, err := allowLayers(ctx, layers, own)
		n := copy(states, own)
		for j := n; j < len(states); j++ {
			states[j] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: -1}}
		}
		return d, i, err
	}
	return allowLayers(ctx, layers, states)
}

// allowLayers is AllowLayers that also returns the binding layer's index
// and sets states[i] to layer i's
// state after the decision, when Redis decided (see decode); otherwise
// (a cached denial answered, or Redis did not decide) it sets every
// Remaining to -1, unknown. states is nil or has len(layers) elements.
func allowLayers(ctx context.Context, layers []Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	return allowRecorded(ctx, layers, states, nil)
}

// allowRecorded is allowLayers that, with rec, records in rec the
// admission of its one layer (Limiter.AdmitN).
func allowRecorded(ctx context.Context, layers []Layer, states []hotlimit.LayerState, rec *Admission) (hotlimit.Decision, int, error) {
	for i := range states {
		states[i] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: -1}}
	}
	if len(layers) == 0 {
		// Checked against no limit, a request is not admitted, as
		// hotlimit.AllowLayers decides.
		return hotlimit.Decision{RetryAfter: hotlimit.Never}, -1, nil
	}
	if hasRepeat(layers) {
		return allowGrouped(ctx, layers, states)
	}
	timeout, d, i, refused, err := checkLayers(layers, states)
	if refused {
		return d, i, err
	}
	for _, ly := range layers {
		if ly.Limiter.leases != nil {
			return allowLeased(ctx, layers, states)
		}
	}
	// A cached denial comes first: it costs no allocation. (A call whose
	// keys span cluster slots never reaches Redis, so none is cached.)
	if d, i, ok := localDenial(layers); ok {
		return d, i, nil
	}
	return callLayers(ctx, layers, states, rec, timeout)
}

// checkLayers returns the smallest of the layers' timeouts, or, refused,
// the answer to a call that cannot go to Redis: a layer with a nil
// Limiter or a key longer than hotlimit.MaxKeyLen denies it (states[i]
// then reports what hotlimit reports of such a layer), and limiters on
// different clients are misconfigured.
func checkLayers(layers []Layer, states []hotlimit.LayerState) (timeout time.Duration, d hotlimit.Decision, binding int, refused bool, err error) {
	first := layers[0].Limiter
	for i, ly := range layers {
		if ly.Limiter == nil || len(ly.Key) > hotlimit.MaxKeyLen {
			if states != nil {
				// What hotlimit reports of such a layer: nothing left,
				// no unit ever back. The other layers were not read:
				// unknown.
				states[i] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: 0}, Next: hotlimit.Never}
			}
			if ly.Limiter == nil {
				return 0, hotlimit.Decision{RetryAfter: hotlimit.Never}, i, true, nil
			}
			return 0, hotlimit.Decision{Limit: ly.Limiter.spec.limit, RetryAfter: hotlimit.Never}, i, true, nil
		}
		if ly.Limiter.client != first.client {
			d, i, err := misconfigured(first, -1, errMixedClients)
			return 0, d, i, true, err
		}
		if i == 0 || ly.Limiter.timeout < timeout {
			timeout = ly.Limiter.timeout
		}
	}
	return timeout, hotlimit.Decision{}, 0, false, nil
}

// callLayers decides layers in one script call to the node of their
// keys, within timeout, through that node's circuit in each of their
// breakers, and records the admission in rec (see allowRecorded).
func callLayers(ctx context.Context, layers []Layer, states []hotlimit.LayerState, rec *Admission, timeout time.Duration) (hotlimit.Decision, int, error) {
	first := layers[0].Limiter
	keys := layerKeys(layers)
	if first.rt.cluster != nil {
		if err := sameSlot(layers, keys); err != nil {
			return misconfigured(first, -1, err)
		}
	}
	if err := ctx.Err(); err != nil {
		// The caller gave up before the call: that says nothing about
		// Redis, so no circuit counts it.
		return failed(layers, "", err)
	}
	// The timeout bounds finding the node (a cluster client may have to
	// load its slot map) as well as the call. A single server's is known
	// (and a batched call needs no context of its own: see run).
	until := time.Now().Add(timeout)
	cctx := ctx
	if first.rt.single == nil {
		var cancel context.CancelFunc
		if cctx, cancel = boundedBy(ctx, until); cancel != nil {
			defer cancel()
		}
	}
	client, node, err := first.rt.route(cctx, first.client, keys[0])
	if err != nil {
		reportCall(first.hooks, "", 0, err)
		return failed(layers, "", err)
	}
	var cbuf [4]*circuit
	var tbuf [4]ticket // cs[i]'s outcome report
	cs, tickets, ok := acquireAll(cbuf[:0], tbuf[:0], layers, node)
	if !ok {
		return failed(layers, node, ErrCircuitOpen)
	}
	sent := sentAt(layers)
	var rbuf [2 + 5*8]int64
	var incKey string
	if rec != nil {
		incKey = first.incKey(layers[0].Key)
	}
	reply, err := run(cctx, until, client, node, layers, keys, states != nil, incKey, rbuf[:0])
	failedNode := false
	for i, c := range cs {
		failedNode = settle(ctx, c, tickets[i], err, first.hooks) || failedNode
	}
	if err != nil {
		if failedNode {
			// The node may come back without the state the cached
			// denials describe.
			forgetDenials(layers)
		}
		return failed(layers, node, err)
	}
	return decided(reply, layers, states, rec, node, sent)
}

// layerKeys returns the Redis key of each layer (Limiter.RedisKey), cut
// from one string built for them all: one allocation for a decision's
// keys instead of one a layer. Strings are immutable, so keys that share
// bytes share nothing else.
func layerKeys(layers []Layer) []string {
	keys := make([]string, len(layers))
	if len(layers) == 1 {
		keys[0] = layers[0].Limiter.RedisKey(layers[0].Key)
		return keys
	}
	n := 0
	for _, ly := range layers {
		head, tail := keyParts(ly.Limiter, ly.Key)
		n += len(head) + len(ly.Key) + len(tail)
	}
	var b strings.Builder
	b.Grow(n)
	for _, ly := range layers {
		head, tail := keyParts(ly.Limiter, ly.Key)
		b.WriteString(head)
		b.WriteString(ly.Key)
		b.WriteString(tail)
	}
	all, start := b.String(), 0
	for i, ly := range layers {
		head, tail := keyParts(ly.Limiter, ly.Key)
		end := start + len(head) + len(ly.Key) + len(tail)
		keys[i], start = all[start:end], end
	}
	return keys
}

// keyParts returns what RedisKey puts before and after key.
func keyParts(l *Limiter, key string) (head, tail string) {
	if l.special != "" && (key == "" || key[0] == '}') {
		return l.special, ""
	}
	return l.head, l.tail
}

// acquireAll goes through node's circuit in every distinct breaker of the
// layers (usually one, shared), appending each circuit to cs and its
// ticket to tickets; when one refuses, it releases those acquired and
// reports false.
func acquireAll(cs []*circuit, tickets []ticket, layers []Layer, node string) ([]*circuit, []ticket, bool) {
	hooks := layers[0].Limiter.hooks
	for _, ly := range layers {
		if c := ly.Limiter.circuit(node); !slices.Contains(cs, c) {
			cs = append(cs, c)
		}
	}
	for i, c := range cs {
		ok, t := c.acquire(hooks)
		if !ok {
			for j, a := range cs[:i] {
				a.release(tickets[j], hooks)
			}
			return cs, tickets, false
		}
		tickets = append(tickets, t)
	}
	return cs, tickets, true
}

// decided returns the Decision of layers that node's script call
// replied with reply, sent at sent: it records an admission in rec (the
// reply then ends with its incarnation and mark) and caches a denial
// (WithLocalDenials).
func decided(reply []int64, layers []Layer, states []hotlimit.LayerState, rec *Admission, node string, sent time.Duration) (hotlimit.Decision, int, error) {
	var inc, mark int64
	if rec != nil && len(reply) > 2 && reply[0] == 1 {
		inc, mark, reply = reply[len(reply)-2], reply[len(reply)-1], reply[:len(reply)-2]
	}
	d, denied, binding, err := decode(reply, layers, states)
	if err != nil {
		return failed(layers, node, err)
	}
	if rec != nil && d.Allowed {
		*rec = Admission{l: layers[0].Limiter, key: layers[0].Key, inc: inc, mark: mark, cost: layers[0].Cost}
	}
	if denied >= 0 {
		remember(layers, denied, binding, d, sent)
	}
	return d, binding, nil
}

// allowLeased decides layers whose limiters are all in lease mode, in
// process and all or nothing: each layer decides from its lease in order,
// and when one refuses, the units the layers before it took go back into
// their leases. An admitted call reports the layer with the fewest
// requests of its cost left, as hotlimit.AllowLayers does; a refused one
// the layer that refused (the layers after it are not decided) with the
// largest ResetAfter of those decided. states[i], when asked for, is
// layer i's Remaining after the call (-1 for a layer not decided) and an
// unknown Window (Never). A layer a failure policy admitted takes nothing
// to give back; its error is returned with the call's Decision.
func allowLeased(ctx context.Context, layers []Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	for _, ly := range layers {
		if ly.Limiter.leases == nil {
			return misconfigured(layers[0].Limiter, -1, errMixedModes)
		}
	}
	var gbuf [8]*grant
	spent := gbuf[:0] // spent[j]: the grant layer j's units came from, or nil
	var out hotlimit.Decision
	binding, best := -1, int64(0)
	var failure error
	for i, ly := range layers {
		d, g, err := ly.Limiter.leases.decide(ctx, ly.Key, ly.Cost)
		if states != nil {
			states[i] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: d.Remaining}, Next: hotlimit.Never}
		}
		if !d.Allowed {
			for j, g := range spent {
				if g != nil {
					g.avail.Add(layers[j].Cost)
					if states != nil {
						states[j].Decision.Remaining += layers[j].Cost
					}
				}
			}
			d.ResetAfter = max(d.ResetAfter, out.ResetAfter)
			return d, i, err
		}
		if err != nil {
			failure, g = err, nil
		}
		spent = append(spent, g)
		if n := requests(d.Remaining, ly.Cost); binding < 0 || n < best || n == best && d.Remaining < out.Remaining {
			best, binding = n, i
			out.Limit, out.Remaining = d.Limit, d.Remaining
		}
		out.Allowed = true
		out.ResetAfter = max(out.ResetAfter, d.ResetAfter)
	}
	return out, binding, failure
}

// hasRepeat reports whether two layers name the same limiter and key.
func hasRepeat(layers []Layer) bool { return repeat.Any(len(layers), layerOf(layers)) }

// firstOf returns the index of the first layer on layer i's limiter and
// key (i itself when none comes before it; a nil Limiter is never
// repeated).
func firstOf(layers []Layer, i int) int { return repeat.First(i, layerOf(layers)) }

// layerOf returns the function of package repeat giving a layer's
// limiter and key.
func layerOf(layers []Layer) func(int) (*Limiter, string) {
	return func(j int) (*Limiter, string) { return layers[j].Limiter, layers[j].Key }
}

// allowGrouped decides layers in which a limiter and key repeat as
// hotlimit.AllowLayers does: they are one limit, decided once at the first
// of those layers for the sum of their costs (−1, never admitted, when one
// of them is negative; saturating above every limit), and each of them
// reports that decision. The binding index is the group's first layer.
func allowGrouped(ctx context.Context, layers []Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	group := make([]int, len(layers)) // layer j is decided as grouped[group[j]]
	var grouped []Layer
	var at []int // at[k]: the first layer of grouped[k]
	for j, ly := range layers {
		f := firstOf(layers, j)
		if f < j {
			k := group[f]
			group[j] = k
			if g := &grouped[k]; g.Cost >= 0 {
				if ly.Cost < 0 {
					g.Cost = -1
				} else {
					g.Cost = min(g.Cost, math.MaxInt64-ly.Cost) + ly.Cost
				}
			}
			continue
		}
		group[j] = len(grouped)
		grouped = append(grouped, ly)
		at = append(at, j)
	}
	var st []hotlimit.LayerState
	if states != nil {
		st = make([]hotlimit.LayerState, len(grouped))
	}
	d, i, err := allowLayers(ctx, grouped, st)
	for j := range states {
		states[j] = st[group[j]]
	}
	if i >= 0 {
		i = at[i]
	}
	return d, i, err
}

// failed returns the layers' failure policies' Decision for a call that
// Redis did not decide, with cause wrapped in ErrUnavailable, and reports
// both to the hooks.
func failed(layers []Layer, node string, cause error) (hotlimit.Decision, int, error) {
	d, i := failDecision(layers, node)
	err := fmt.Errorf("%w: %w", ErrUnavailable, cause)
	if h := layers[0].Limiter.hooks; h != nil && h.Failure != nil {
		h.Failure(layers[0].Limiter.name, d, err)
	}
	return d, i, err
}

// misconfigured returns the denial of a call that cannot work as
// configured, with binding index i and err, and reports both to the
// hooks of first, the first layer's limiter.
func misconfigured(first *Limiter, i int, err error) (hotlimit.Decision, int, error) {
	d := hotlimit.Decision{RetryAfter: hotlimit.Never}
	if h := first.hooks; h != nil && h.Misconfigured != nil {
		h.Misconfigured(first.name, d, err)
	}
	return d, i, err
}

// run makes the one script call for layers, whose Redis keys are keys, on
// client (node's, as route returned them), by until (the layers' timeout
// from the call's start) or ctx's deadline, whichever comes first, and
// appends the reply's integers to out. A batched call is bounded by its
// batch (see batcher.do), without a context of its own; any other by a
// context ending at until, unless ctx's ends first. With next, the reply reports each layer's next unit
// back too; with incKey (one layer), an admission's reply ends with its
// record (see script.lua).
//
// The slices handed to go-redis escape to the heap whatever their size:
// they are made to measure rather than from arrays on the stack, which
// would move to the heap whole.
func run(ctx context.Context, until time.Time, client redis.Scripter, node string, layers []Layer, keys []string, next bool, incKey string, out []int64) ([]int64, error) {
	args, windows := scriptArgs(layers, next, incKey)
	first := layers[0].Limiter
	var vals []any
	var err error
	if b := first.rt.batcherFor(node); b != nil && first.testNow == nil && incKey == "" {
		dl := until
		if d, ok := ctx.Deadline(); ok && d.Before(dl) {
			dl = d
		}
		var now int64
		vals, now, err = b.do(ctx, &batchCall{client: client, node: node, keys: keys, args: args, next: next, windows: windows, deadline: dl, until: until, hooks: first.hooks})
		if err == nil && now >= 0 {
			if len(vals) != len(layers) {
				return nil, errBadReply(vals)
			}
			return admittedWindows(vals, now, layers, next, out), nil
		}
	} else {
		sctx, cancel := boundedBy(ctx, until)
		vals, err = first.rt.send(sctx, decideScript, client, node, first.hooks, keys, args)
		if cancel != nil {
			cancel()
		}
	}
	if err != nil {
		return nil, err
	}
	for _, v := range vals {
		n, ok := v.(int64)
		if !ok {
			return nil, errBadReply(vals)
		}
		out = append(out, n)
	}
	return out, nil
}

// scriptArgs returns script.lua's arguments for layers (see run), and
// whether every layer is a fixed window (batch.lua's short form).
func scriptArgs(layers []Layer, next bool, incKey string) (args []any, windows bool) {
	args = make([]any, 0, 2+5*len(layers))
	if first := layers[0].Limiter; first.testNow != nil {
		args = append(args, strconv.FormatInt(first.testNow(), 10))
	} else {
		args = append(args, "")
	}
	windows = true
	for _, ly := range layers {
		l := ly.Limiter
		args = append(args, l.argv[0], l.argv[1], l.argv[2], l.argv[3], ly.Cost)
		windows = windows && l.spec.kind == kindFixedWindow
	}
	if next {
		args = append(args, "1")
	}
	if incKey != "" {
		if !next {
			args = append(args, "0")
		}
		args = append(args, incKey)
	}
	return args, windows
}

// admittedWindows appends to out script.lua's reply of an admission of
// fixed windows from windows.lua's short reply, rems (each layer's
// Remaining, as batchReplyFits checked) decided at now (µs): a layer's
// ResetAfter and next unit are the time to its window's end when its
// Remaining is under its Limit, else 0 (see fixedWindows).
func admittedWindows(rems []any, now int64, layers []Layer, next bool, out []int64) []int64 {
	out = append(out, 1)
	for i, ly := range layers {
		rem, sp := rems[i].(int64), &ly.Limiter.spec
		var end int64
		if rem < sp.limit {
			end = sp.a - now%sp.a
		}
		out = append(out, rem, end)
		if next {
			out = append(out, end)
		}
	}
	return out
}

// errBadReply is the error of a reply that is not what the script returns.
func errBadReply(reply any) error {
	return fmt.Errorf("redislimit: unexpected script reply %v", reply)
}

// bounded returns ctx bounded by timeout from now, and the function that
// releases its timer, or ctx itself and nil when the caller's deadline
// comes first (it bounds the call, without a timer of our own).
func bounded(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= timeout {
		return ctx, nil
	}
	return context.WithTimeout(ctx, timeout)
}

// boundedBy returns ctx bounded by dl, and the function that releases
// its timer, or ctx itself and nil when ctx's deadline comes by dl.
func boundedBy(ctx context.Context, dl time.Time) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && !d.After(dl) {
		return ctx, nil
	}
	return context.WithDeadline(ctx, dl)
}

// ErrCrossSlot is returned, with a denial, for a layered call on a Redis
// Cluster whose keys are not all in one slot: one script cannot span
// slots. It is a configuration error, not an outage, so no failure policy
// answers it: give every limiter of the call the same WithHashTag.
var ErrCrossSlot = errors.New("redislimit: the layers' keys are in different Redis Cluster slots (give the limiters one WithHashTag)")

// sameSlot returns an error wrapping ErrCrossSlot unless keys share a slot.
func sameSlot(layers []Layer, keys []string) error {
	if len(keys) < 2 {
		return nil
	}
	s0 := slot(keys[0])
	for i, k := range keys[1:] {
		if s := slot(k); s != s0 {
			return fmt.Errorf("%w: layer 0 (%s) is in slot %d, layer %d (%s) in slot %d",
				ErrCrossSlot, layers[0].Limiter.name, s0, i+1, layers[i+1].Limiter.name, s)
		}
	}
	return nil
}
