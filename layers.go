package hotlimit

import "math"

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
// given back a moment later. Nothing is ever admitted beyond any layer's
// policy, and once every call has returned each layer holds exactly the
// cost of the requests that were admitted by all layers (but for a layer
// whose limiter a Reset changed while the call ran: see Reset).
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
	d, _ := AllowLayersIndex(layers...)
	return d
}

// AllowLayersIndex is AllowLayers that also returns the index of the
// binding layer, the one whose Limit and Remaining the Decision reports,
// for callers that must name it (the RateLimit header names one policy):
// Limit alone cannot tell two layers of the same capacity apart. A layer
// with a nil Limiter binds when it is reached; for no layers, which are
// denied with Never, it is -1.
func AllowLayersIndex(layers ...Layer) (Decision, int) {
	return allowLayers(nil, layers)
}

// AllowLayersEach is AllowLayersIndex that also sets each[i] to layer i's
// own Decision, for callers that report every layer (the RateLimit field
// has one item per limit): when the request was admitted, the layer's
// admission; when it was refused, what the layer alone would decide for
// its cost now, after the other layers were given back (the layer that
// refused it, or, for a nil Limiter, RetryAfter = Never). Layers on the same
// limiter and key report their one decision, for their combined cost
// (see AllowLayers). Remaining and
// ResetAfter are then each layer's state after the call. Give each room
// for every layer (len(each) ≥ len(layers)); a shorter each receives the
// Decisions of the first len(each) layers, and the request is decided on
// every layer all the same.
func AllowLayersEach(each []Decision, layers ...Layer) (Decision, int) {
	if len(each) >= len(layers) {
		return allowLayers(each[:len(layers)], layers)
	}
	var buf [maxStackLayers]Decision
	all := buf[:0]
	if len(layers) > maxStackLayers {
		all = make([]Decision, 0, len(layers))
	}
	all = all[:len(layers)]
	d, i := allowLayers(all, layers)
	copy(each, all)
	return d, i
}

// allowLayers is AllowLayersEach, with each nil when no caller wants it.
func allowLayers(each []Decision, layers []Layer) (Decision, int) {
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
	for i := range layers {
		ly := &layers[i]
		if ly.Limiter == nil {
			refundLayers(layers[:i], ats)
			if each != nil {
				deniedLayers(each, layers, i, Decision{RetryAfter: Never}, dup)
			}
			return Decision{RetryAfter: Never}, i
		}
		cost := ly.Cost
		if dup {
			if j := firstOf(layers, i); j < i { // decided there, for both
				ats = append(ats, taken{})
				if each != nil {
					each[i] = each[j]
				}
				continue
			}
			cost = groupCost(layers, i)
		}
		resets := ly.Limiter.resets.Load() // before the admission: see giveBack
		v, at, p := ly.Limiter.allow(ly.Key, cost)
		if !v.ok {
			refundLayers(layers[:i], ats)
			return deniedLayers(each, layers, i, p.decision(v, cost), dup)
		}
		ats = append(ats, taken{at, resets, cost})
		d := p.decision(v, cost)
		if each != nil {
			each[i] = d
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

// requests is how many more requests of cost fit in remaining units.
func requests(remaining, cost int64) int64 {
	if cost <= 0 {
		return math.MaxInt64
	}
	return remaining / cost
}

// hasRepeat reports whether two layers name the same limiter and key.
// Comparing limiters first keeps it to a few pointer comparisons when
// they differ.
func hasRepeat(layers []Layer) bool {
	for i := 1; i < len(layers); i++ {
		if firstOf(layers, i) < i {
			return true
		}
	}
	return false
}

// firstOf returns the index of the first layer on layer i's limiter and
// key (i itself when none comes before it).
func firstOf(layers []Layer, i int) int {
	ly := &layers[i]
	for j := range i {
		if layers[j].Limiter == ly.Limiter && ly.Limiter != nil && layers[j].Key == ly.Key {
			return j
		}
	}
	return i
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
// instant it was made at, its limiter's Reset count before it, and the
// cost it consumed (0 for a layer decided with an earlier one).
type taken struct {
	at     int64
	resets uint64
	cost   int64
}

// refundLayers gives back, latest first, what the admitted layers took.
func refundLayers(layers []Layer, ats []taken) {
	for j := len(layers) - 1; j >= 0; j-- {
		layers[j].Limiter.giveBack(layers[j].Key, ats[j].cost, ats[j].at, ats[j].resets)
	}
}

// deniedLayers builds the Decision of a layered request that layer i
// denied with d, after the earlier layers were given back, and returns
// the binding layer's index. When each is not nil, it also records every
// layer's own Decision there. dup reports whether layers repeat a limiter
// and key: each is then checked for its group's combined cost.
func deniedLayers(each []Decision, layers []Layer, i int, d Decision, dup bool) (Decision, int) {
	out, binding := d, i
	nilSeen := false
	if each != nil {
		each[i] = d
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
			if each != nil {
				each[j] = Decision{RetryAfter: Never}
			}
			continue
		}
		cost := ly.Cost
		if dup {
			if firstOf(layers, j) == firstOf(layers, i) { // i's own limiter and key
				if each != nil {
					each[j] = d
				}
				continue
			}
			cost = groupCost(layers, j)
		}
		c := ly.Limiter.check(ly.Key, cost)
		if each != nil {
			each[j] = ly.Limiter.withDelay(c, cost)
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
	now := l.now()
	if len(key) > MaxKeyLen {
		return l.p.Load().decision(verdict{retry: int64(Never)}, 0)
	}
	var v, cur verdict
	var p *params
	if l.isSlidingLog() {
		cur, v, p = l.peekLog(key, now, cost)
	} else {
		var w uint64
		w, p = l.word(key, now)
		_, cur = p.step(w, now, 0)
		if cost >= 0 && cost <= p.limit {
			_, v = p.step(w, now, cost)
		}
	}
	if cost < 0 || cost > p.limit {
		v = cur
		v.ok, v.retry = false, int64(Never)
		return p.decision(v, 0)
	}
	if v.ok {
		// Report the current state, as a denial would, not the state
		// after an admission that did not happen.
		v.rem, v.reset = cur.rem, cur.reset
	}
	return p.decision(v, cost)
}
