package hotlimit

import (
	"math"
	"sync/atomic"
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
// given back a moment later. Nothing is ever admitted beyond any layer's
// policy, and once every call has returned each layer holds exactly the
// cost of the requests that were admitted by all layers.
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
// It allocates nothing for up to 8 layers.
func AllowLayers(layers ...Layer) Decision {
	d, _ := AllowLayersIndex(layers...)
	return d
}

// AllowLayersIndex is AllowLayers that also returns the index of the
// binding layer, the one whose Limit and Remaining the Decision reports,
// for callers that must name it (the RateLimit header names one policy):
// Limit alone cannot tell two layers of the same capacity apart. A layer
// with a nil Limiter binds when it is reached; for no layers it is -1.
func AllowLayersIndex(layers ...Layer) (Decision, int) {
	var buf [maxStackLayers]int64
	ats := buf[:0]
	if len(layers) > maxStackLayers {
		ats = make([]int64, 0, len(layers))
	}
	var out Decision
	var best int64 // the binding layer's requests(Remaining, Cost)
	binding := -1
	for i := range layers {
		ly := &layers[i]
		if ly.Limiter == nil {
			refundLayers(layers[:i], ats)
			return Decision{RetryAfter: Never}, i
		}
		v, at, p := ly.Limiter.allow(ly.Key, ly.Cost)
		if !v.ok {
			refundLayers(layers[:i], ats)
			return deniedLayers(layers, i, p.decision(v, ly.Cost))
		}
		ats = append(ats, at)
		d := p.decision(v, ly.Cost)
		if n := requests(d.Remaining, ly.Cost); i == 0 || n < best || n == best && d.Remaining < out.Remaining {
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

// refundLayers gives back, latest first, what the admitted layers took.
func refundLayers(layers []Layer, ats []int64) {
	for j := len(layers) - 1; j >= 0; j-- {
		layers[j].Limiter.refund(layers[j].Key, layers[j].Cost, ats[j])
	}
}

// deniedLayers builds the Decision of a layered request that layer i
// denied with d, after the earlier layers were given back, and returns
// the binding layer's index.
func deniedLayers(layers []Layer, i int, d Decision) (Decision, int) {
	out, binding := d, i
	nilSeen := false
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
			continue
		}
		c := ly.Limiter.check(ly.Key, ly.Cost)
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
	if l.logs != nil {
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

// Refund gives back cost that an admission for key consumed, as if it had
// not happened: the token and leaky buckets move the key's TAT back by
// cost·T (never making a bucket fuller than full); the windows lower the
// count of the current window (or, for the sliding window, of the previous
// one when the window has just turned); the sliding log removes the newest
// admitted instants that still count. It never gives back more than the
// state holds, and does nothing for a key the limiter no longer holds. Use
// it when work that was admitted did not happen (the request failed
// validation, a later check refused it); AllowLayers uses it internally.
func (l *Limiter) Refund(key string, cost int64) {
	if cost <= 0 || cost > l.Limit() || len(key) > MaxKeyLen {
		return
	}
	if l.logs != nil {
		l.refundLog(key, cost, maxTime) // the newest instants
		return
	}
	l.refund(key, cost, l.now())
}

// refund gives back cost admitted at instant at.
func (l *Limiter) refund(key string, cost, at int64) {
	if cost <= 0 {
		return
	}
	if l.logs != nil {
		l.refundLog(key, cost, at)
		return
	}
	now := l.now()
	h := l.hash(key)
	s := l.shardOf(h)
	t := s.tab.Load()
	if sl := t.find(h, key); sl != nil {
		if fresh, live := refundAt(t.p, &sl.word, cost, at, now); live {
			l.tally.uncount()
			if fresh {
				l.retireFresh(s, h, key, now)
			}
			return
		}
	}
	sl, _ := l.slotLocked(s, h, key, now, false)
	if sl != nil {
		if fresh, _ := refundAt(s.tab.Load().p, &sl.word, cost, at, now); fresh {
			l.retireFreshLocked(s, sl, now)
		}
		l.tally.uncount()
	}
	s.mu.Unlock()
}

// retireFresh removes key's entry if its state is fresh, as a sweep would:
// a request refused by a later layer then leaves no state behind.
func (l *Limiter) retireFresh(s *shard, h uint64, key string, now int64) {
	if sl, _ := l.slotLocked(s, h, key, now, false); sl != nil {
		l.retireFreshLocked(s, sl, now)
	}
	s.mu.Unlock()
}

// retireFreshLocked retires sl if its state is fresh at now. Requires s.mu.
func (l *Limiter) retireFreshLocked(s *shard, sl *slot, now int64) {
	w := sl.word.Load()
	if w&deadBit != 0 || s.tab.Load().p.resetAfter(w, now) != 0 {
		return
	}
	l.raiseSweptAt(now) // before the entry goes: see gc.go
	if s.tab.Load().retire(sl, w) {
		l.keys.Add(-1)
		s.swept.Add(1)
	}
}

// refundAt runs refund's CAS loop. live is false if the word is retired;
// fresh reports whether the state is fresh afterwards.
func refundAt(p *params, w *atomic.Uint64, cost, at, now int64) (fresh, live bool) {
	for {
		old := w.Load()
		if old&deadBit != 0 {
			return false, false
		}
		var next uint64
		if p.kind <= kindLeakyBucket {
			next = p.g.refund(old, now, cost)
		} else {
			next = p.win.refund(old, cost, at)
		}
		if next == old || w.CompareAndSwap(old, next) {
			return p.resetAfter(next, now) == 0, true
		}
	}
}
