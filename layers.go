package hotlimit

import (
	"math"
	"time"

	"github.com/hotlimit/hotlimit/internal/repeat"
)

// Layer is one limit of a layered check: a limiter, the key it limits the
// request by, and the request's cost there. See AllowLayers.
type Layer struct {
	Limiter *Limiter
	Key     string
	Cost    int64
}

// maxStackLayers is how many layers AllowLayers handles without
// allocating.
const maxStackLayers = 8

// AllowLayers admits a request only if every layer admits it: for example a
// token bucket per API token, a fixed window per client IP and a global
// limit. It decides the layers in order, consuming in each; if one denies,
// it gives back exactly what the earlier layers took, so a request refused
// by the global layer never burns a user's quota.
//
// "All or nothing" is about the final accounting, not about instants: while
// AllowLayers runs, an earlier layer has already consumed, and a concurrent
// request may see that and be denied by it, although the consumption is
// given back a moment later. The layers whose limiters read the default
// clock (no WithClock, no WithCoarseClock) are decided at one reading of
// it, taken as the first of them is decided. Nothing is ever admitted
// beyond any layer's policy, and once every call has returned each layer
// holds exactly the cost of the requests that were admitted by all
// layers. A layer gives back only what its state still owes to its own
// admission (refund.go): nothing if the key's entry was removed meanwhile
// (Reset, eviction under WithMaxKeys), and for the buckets not the units
// that refilled while the call ran, nor, after a concurrent give-back
// below its admission moved its units back and the clock moved on, more
// than those units may still hold (docs/semantics.md, "Give-backs").
//
// The Decision reports the binding layer: Remaining and Limit are that
// layer's, in its units. Allowed, the binding layer is the one that would
// admit the fewest more requests of the same costs (⌊Remaining/Cost⌋,
// ties going to the smaller Remaining), so a client told "Remaining 4" by a
// cost-1 layer is not misled when a cost-3 layer has 6 units, 2 requests,
// left; Delay and ResetAfter are the largest. Denied, the binding layer is
// the one among those that would deny the request (each checked without
// consuming) with the largest RetryAfter, which is the Decision's
// RetryAfter; ResetAfter is the largest of all layers'. A layer with a nil
// Limiter denies with RetryAfter = Never.
//
// A limiter and key that appear in several layers are one limit: they are
// decided once, at the first of those layers, for the sum of their costs
// (a negative cost among them makes the sum invalid, denied with Never),
// and each of those layers reports that decision. Decided one layer after
// the other, the request would be refused on a state in which the first
// layer still held its units, reporting neither the state after the call
// nor a RetryAfter after which the request is admitted.
//
// No layers deny with RetryAfter = Never: a request no limit was checked
// against is not admitted (failing open would turn a caller's empty list,
// built from configuration, into no limit at all).
//
// It allocates nothing for up to 8 layers on keys the limiters hold. A
// layer's key that was new is inserted as AllowN inserts it, and a refused
// request that leaves such a key fresh removes it again, so repeating that
// request inserts it again, now and then rebuilding a shard's table.
func AllowLayers(layers ...Layer) Decision {
	d, _ := allowLayers(nil, layers)
	return d
}

// LayerState is one layer's own state after a layered decision, as
// AllowLayersState reports it: what a caller shows of each limit (the
// RateLimit field's r and t, a quota's policy), all from the decision.
type LayerState struct {
	// Decision is the layer's own Decision: when the request was
	// admitted, the layer's admission; when it was refused, what the
	// layer alone would decide for its cost now, after the other layers
	// were given back (the layer that refused it, or, for a nil Limiter,
	// RetryAfter = Never). Layers on the same limiter and key report
	// their one decision, for their combined cost (see AllowLayers).
	// Remaining and ResetAfter are then each layer's state after the
	// call.
	Decision Decision
	// Next is how long Decision.Remaining stays the most the layer
	// admits: the time until it admits one unit more, what
	// Check(key, Remaining+1).RetryAfter says on the state Decision
	// describes, at the instant it describes. 0 when the layer is full
	// (Remaining ≥ Limit). For the buckets and the fixed window it
	// follows from Decision alone; for the sliding window and the
	// sliding log it is read from the key's state right after, at the
	// decision's instant, and is Never when another request or a
	// SetPolicy changed that state first. Never for a nil Limiter, a
	// concurrency limit and a key longer than MaxKeyLen too.
	Next time.Duration
	// Policy describes the policy the layer's Decision was made under,
	// which SetPolicy may have replaced since.
	Policy PolicyInfo
}

// AllowLayersState is AllowLayers that also returns the index of the
// binding layer, the one whose Limit and Remaining the Decision reports,
// and reports each layer's state in states[i]: its own Decision, how long
// until it admits a unit more, and the policy it decided under. The index
// is for callers that must name the binding layer (the RateLimit header
// names one policy): Limit alone cannot tell two layers of the same
// capacity apart. A layer with a nil Limiter binds when it is reached;
// for no layers, which are denied with Never, it is -1. The states are
// for callers that report every layer (the RateLimit field has one item
// per limit).
//
// Give states room for every layer (len(states) ≥ len(layers)): it then
// allocates nothing for up to 8 layers on keys the limiters hold. An
// empty (nil) states asks for no state: the call then costs what
// AllowLayers costs, nothing spent on the states. A shorter states
// receives the states of the first len(states) layers, at the cost of an
// allocation, and the request is decided on every layer all the same.
func AllowLayersState(states []LayerState, layers ...Layer) (Decision, int) {
	if len(states) == 0 {
		return allowLayers(nil, layers)
	}
	if len(states) >= len(layers) {
		return allowLayers(states[:len(layers)], layers)
	}
	all := make([]LayerState, len(layers))
	d, i := allowLayers(all, layers)
	copy(states, all)
	return d, i
}

// allowLayers is AllowLayersState with len(st) == len(layers), or
// without states (st nil).
func allowLayers(st []LayerState, layers []Layer) (Decision, int) {
	if len(layers) == 0 {
		return Decision{RetryAfter: Never}, -1
	}
	dup := hasRepeat(layers)
	var buf [maxStackLayers]taken
	ats := buf[:0]
	if len(layers) > maxStackLayers {
		ats = make([]taken, 0, len(layers))
	}
	var out Decision
	var best int64 // the binding layer's requests(Remaining, Cost)
	binding := -1
	sysNow := int64(-1) // a reading of the default clock (≥ 0) once a layer took it
	for i := range layers {
		ly := &layers[i]
		if ly.Limiter == nil {
			refundLayers(layers[:i], ats)
			if st != nil {
				deniedLayers(st, layers, i, Decision{RetryAfter: Never}, dup)
			}
			return Decision{RetryAfter: Never}, i
		}
		cost := ly.Cost
		if dup {
			if j := firstOf(layers, i); j < i { // decided there, for both
				ats = append(ats, taken{})
				if st != nil {
					st[i] = st[j] // its Decision too
				}
				continue
			}
			cost = groupCost(layers, i)
		}
		ats = append(ats, taken{cost: cost})
		now := sysNow
		if now < 0 || !ly.Limiter.onDefaultClock() {
			if now = ly.Limiter.now(); ly.Limiter.onDefaultClock() {
				sysNow = now
			}
		}
		v, at, p := ly.Limiter.allow(ly.Key, cost, &ats[i].admission, now)
		if !v.ok {
			refundLayers(layers[:i], ats)
			if st != nil {
				st[i].Next, st[i].Policy = ly.Limiter.deniedNext(ly.Key, p, v, at), p.info
			}
			return deniedLayers(st, layers, i, p.decision(v, cost), dup)
		}
		d := p.decision(v, cost)
		if st != nil {
			st[i].Decision, st[i].Next, st[i].Policy = d, ly.Limiter.nextUnit(ly.Key, p, v, at), p.info
		}
		if n := requests(d.Remaining, cost); i == 0 || n < best || n == best && d.Remaining < out.Remaining {
			best, out.Remaining, out.Limit, binding = n, d.Remaining, d.Limit, i
		}
		out.ResetAfter = max(out.ResetAfter, d.ResetAfter)
		out.Delay = max(out.Delay, d.Delay)
	}
	out.Allowed = true
	return out, binding
}

// onDefaultClock reports whether l reads the default clock (no
// WithClock, no WithCoarseClock, whose cache is each limiter's own).
// allowLayers decides the layers of all such limiters at one reading of
// it, taken at the first of them: a clock read is the largest fixed cost
// of a decision (about 110 instructions with callgrind), and the reading
// is one instant of the call, as a single AllowN's is; a later layer's
// state that another request moved past it counts it as no time passed
// (docs/semantics.md, Stale readings). Clocks given by WithClock are not
// compared: an interface comparison panics on a clock of an uncomparable
// type.
func (l *Limiter) onDefaultClock() bool { return l.clock == nil && l.coarse == nil }

// requests is how many more requests of cost fit in remaining units.
func requests(remaining, cost int64) int64 {
	if cost <= 0 {
		return math.MaxInt64
	}
	return remaining / cost
}

// hasRepeat reports whether two layers name the same limiter and key. It
// compares limiters only, a few pointer comparisons (unrolled for 2 and 3
// layers, the common cases), and leaves the keys to repeatsKey when two
// layers share a limiter. It is kept out of line: inlined, it cost
// allowLayers registers, about 60 instructions more per 3-layer call
// (callgrind).
//
//go:noinline
func hasRepeat(layers []Layer) bool {
	switch len(layers) {
	case 0, 1:
		return false
	case 2:
		if layers[0].Limiter != layers[1].Limiter {
			return false
		}
	case 3:
		a, b, c := layers[0].Limiter, layers[1].Limiter, layers[2].Limiter
		if a != b && a != c && b != c {
			return false
		}
	default:
		if !sharesLimiter(layers) {
			return false
		}
	}
	return repeatsKey(layers)
}

// sharesLimiter reports whether two layers name the same (non-nil)
// limiter.
func sharesLimiter(layers []Layer) bool {
	for i := 1; i < len(layers); i++ {
		li := layers[i].Limiter
		for j := 0; j < i; j++ {
			if layers[j].Limiter == li && li != nil {
				return true
			}
		}
	}
	return false
}

// repeatsKey is hasRepeat once two layers share a limiter: it compares
// keys too.
func repeatsKey(layers []Layer) bool { return repeat.Any(len(layers), layerOf(layers)) }

// firstOf returns the index of the first layer on layer i's limiter and
// key (i itself when none comes before it).
func firstOf(layers []Layer, i int) int { return repeat.First(i, layerOf(layers)) }

// layerOf returns the function of package repeat giving a layer's
// limiter and key.
func layerOf(layers []Layer) func(int) (*Limiter, string) {
	return func(j int) (*Limiter, string) { return layers[j].Limiter, layers[j].Key }
}

// groupCost returns the combined cost of every layer on layer i's limiter
// and key: −1 if one of them is negative (a request that can never pass),
// saturating at math.MaxInt64, which is above every Limit.
func groupCost(layers []Layer, i int) int64 {
	ly := &layers[i]
	var sum int64
	for j := range layers {
		if lj := &layers[j]; lj.Limiter == ly.Limiter && lj.Key == ly.Key {
			if lj.Cost < 0 {
				return -1
			}
			sum = min(sum, math.MaxInt64-lj.Cost) + lj.Cost
		}
	}
	return sum
}

// taken is what AllowLayers needs to give back a layer's admission: the
// admission (refund.go) and the cost it consumed (0 for a layer decided
// with an earlier one).
type taken struct {
	admission
	cost int64
}

// refundLayers gives back, latest first, what the admitted layers took:
// each layer's own admission.
func refundLayers(layers []Layer, ats []taken) {
	for j := len(layers) - 1; j >= 0; j-- {
		layers[j].Limiter.giveBack(layers[j].Key, ats[j].cost, ats[j].admission)
	}
}

// deniedLayers builds the Decision of a layered request that layer i
// denied with d, after the earlier layers were given back, and returns
// the binding layer's index. When st is not nil, it also records the
// state of every layer there (the caller has recorded layer i's Next and
// Policy). dup reports whether
// layers repeat a limiter and key: each is then checked for its group's
// combined cost.
func deniedLayers(st []LayerState, layers []Layer, i int, d Decision, dup bool) (Decision, int) {
	out, binding := d, i
	nilSeen := false
	if st != nil {
		st[i].Decision = d
	}
	if st != nil && layers[i].Limiter == nil {
		st[i] = LayerState{Decision: d, Next: Never}
	}
	for j := range layers {
		ly := &layers[j]
		if j == i {
			continue
		}
		if ly.Limiter == nil {
			if !nilSeen { // the first nil layer binds: Never, Limit 0
				nilSeen, binding = true, j
			}
			out.RetryAfter, out.Limit, out.Remaining = Never, 0, 0
			if st != nil {
				st[j] = LayerState{Decision: Decision{RetryAfter: Never}, Next: Never}
			}
			continue
		}
		cost := ly.Cost
		if dup {
			if firstOf(layers, j) == firstOf(layers, i) { // i's own limiter and key
				if st != nil {
					st[j] = st[i] // its Decision is d
				}
				continue
			}
			cost = groupCost(layers, j)
		}
		c, cur, at, p := ly.Limiter.checkAt(ly.Key, cost)
		if st != nil {
			st[j].Decision, st[j].Next, st[j].Policy = ly.Limiter.withDelay(c, cost), ly.Limiter.deniedNext(ly.Key, p, cur, at), p.info
		}
		if !c.Allowed && c.RetryAfter > out.RetryAfter {
			out.RetryAfter, out.Limit, out.Remaining, binding = c.RetryAfter, c.Limit, c.Remaining, j
		}
		out.ResetAfter = max(out.ResetAfter, c.ResetAfter)
	}
	out.Allowed, out.Delay = false, 0
	return out, binding
}

// check decides key and cost now without consuming anything and without
// counting the decision: what AllowN would answer. Remaining and
// ResetAfter are those of the current state.
func (l *Limiter) check(key string, cost int64) Decision {
	d, _, _, _ := l.checkAt(key, cost)
	return d
}

// checkAt is check that also returns the verdict of a peek at the state
// it read, the instant it read it at and the policy it decided under.
func (l *Limiter) checkAt(key string, cost int64) (Decision, verdict, int64, *params) {
	now := l.now()
	if len(key) > MaxKeyLen {
		p := l.p.Load()
		return p.decision(verdict{retry: int64(Never)}, 0), verdict{}, now, p
	}
	var v, cur verdict
	var p *params
	if l.isSlidingLog() {
		cur, v, p = l.peekLog(key, now, cost)
	} else {
		var w uint64
		w, p, now = l.word(key, now)
		_, cur = p.step(w, now, 0)
		if cost >= 0 && cost <= p.limit {
			_, v = p.step(w, now, cost)
		}
	}
	if cost < 0 || cost > p.limit {
		v = cur
		v.ok, v.retry = false, int64(Never)
		return p.decision(v, 0), cur, now, p
	}
	if v.ok {
		// Report the current state, as a denial would, not the state
		// after an admission that did not happen.
		v.rem, v.reset = cur.rem, cur.reset
	}
	return p.decision(v, cost), cur, now, p
}

// nextUnit returns how long after instant at the state a verdict v made
// at under p describes (v.rem, v.reset) admits one unit more than v.rem:
// 0 when v.rem is the whole capacity, Never when it cannot be told. The
// buckets and the fixed window derive it from v. The sliding window and
// the sliding log need the counts behind v: nextUnit reads key's state
// again and uses it only if it is still the one v describes (the same
// policy, the same Remaining at the same instant); otherwise Never. key
// is at most MaxKeyLen long: a longer one is never admitted, and the
// paths of a refusal ask deniedNext.
func (l *Limiter) nextUnit(key string, p *params, v verdict, at int64) time.Duration {
	if v.rem >= p.limit {
		return 0
	}
	switch p.kind {
	case kindTokenBucket, kindLeakyBucket:
		// ResetAfter is the debt; unit rem+1 fits once the debt is down
		// to limit−rem−1 intervals.
		return time.Duration(v.reset - (p.limit-v.rem-1)*p.g.t)
	case kindFixedWindow:
		return time.Duration(v.reset) // everything comes back when the window ends
	case kindSlidingWindow:
		w, tp, _ := l.word(key, at)
		if tp != p || p.win.judgedAt(w, at) != at {
			return Never
		}
		if _, cur := p.win.step(w, at, 0); cur.rem != v.rem {
			return Never
		}
		if _, n := p.win.step(w, at, v.rem+1); !n.ok {
			return time.Duration(n.retry)
		}
	case kindSlidingLog:
		ls, _ := l.logShardOf(key)
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if ls.p != p {
			return Never
		}
		r, now, first := l.logRingLocked(ls, key, at) // now ≥ at: the ring may have been written since
		if p.logVerdict(r, first, now, 0).rem != v.rem {
			return Never
		}
		if n := p.logVerdict(r, first, now, v.rem+1); !n.ok {
			return time.Duration(n.retry + now - at)
		}
	}
	return Never
}

// deniedNext is nextUnit on the paths of a refused layered request, the
// only ones a key longer than MaxKeyLen reaches: no unit ever comes back
// for such a key (Check(key, 1).RetryAfter is Never), so its Next is
// Never, where nextUnit would read the zero verdict it was denied with as
// a full layer (0) or a negative wait. The check stays off the path of an
// admission.
func (l *Limiter) deniedNext(key string, p *params, v verdict, at int64) time.Duration {
	if len(key) > MaxKeyLen {
		return Never
	}
	return l.nextUnit(key, p, v, at)
}
