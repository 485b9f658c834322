package redislimit

import (
	"github.com/hotlimit/hotlimit"
)

// remember caches the denial of layer i in its limiter's two-tier cache,
// unless the key appeared in an earlier layer (then the denial depends on
// that layer's cost too) or the request can never be admitted.
func remember(layers []Layer, i int, d hotlimit.Decision, r []int64) {
	ly := layers[i]
	c := ly.Limiter.cache
	if c == nil {
		return
	}
	o := 2 + 4*i
	retry, reset := micros(r[o+2]), micros(r[o+3])
	if retry == hotlimit.Never {
		return
	}
	for _, prev := range layers[:i] {
		if prev.Limiter == ly.Limiter && prev.Key == ly.Key {
			return
		}
	}
	now := c.now()
	c.put(ly.Key, denial{until: now + retry, resetAt: now + reset, cost: ly.Cost, rem: r[o+1]})
}

// localDenial answers from the two-tier caches: a layer with a live cached
// denial that covers its cost denies the request without a round trip.
func localDenial(layers []Layer) (hotlimit.Decision, int, bool) {
	var d hotlimit.Decision
	found, binding := false, -1
	for i, ly := range layers {
		c := ly.Limiter.cache
		if c == nil || ly.Cost > ly.Limiter.spec.limit {
			// A cost above the limit is never admitted: Redis answers
			// RetryAfter = Never, which no cached denial would.
			continue
		}
		now := c.now()
		den, ok := c.get(ly.Key, ly.Cost, now)
		if !ok {
			continue
		}
		retry := den.until - now
		if !found || retry > d.RetryAfter {
			d.RetryAfter, d.Limit = retry, ly.Limiter.spec.limit
			d.Remaining, d.ResetAfter = den.rem, max(0, den.resetAt-now)
			binding = i
		}
		found = true
	}
	return d, binding, found
}
