package redislimit

import (
	"encoding/binary"
	"hash/maphash"
	"time"

	"github.com/hotlimit/hotlimit"
)

// The two-tier mode (WithLocalDenials): a call that Redis denied is
// remembered in the cache of the layer that denied it, with the whole
// Decision and the shape of the call (its other layers), and the same call
// is answered from there until the Decision's RetryAfter has passed,
// counted from when the call was sent: Redis decided at or after that
// instant, so the entry expires no later than the denial does (possibly
// earlier, by up to a round trip; Redis then decides). A layered call is
// answered only for the same layers, keys and costs, so it reports what
// AllowLayers reported (the binding layer's RetryAfter, the largest
// ResetAfter), counted down.

// shapeOf identifies the layers of a call as seen from layer i: every
// layer's limiter and key, and every cost but i's. It is 0 for a call of
// one layer, whose key and limiter the cache entry's place already says.
func shapeOf(seed maphash.Seed, layers []Layer, i int) uint64 {
	if len(layers) == 1 {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(seed)
	var b [24]byte
	for j, ly := range layers {
		binary.LittleEndian.PutUint64(b[0:], ly.Limiter.id)
		binary.LittleEndian.PutUint64(b[8:], uint64(len(ly.Key)))
		cost := ly.Cost
		if j == i {
			cost = -1 << 63 // the denied layer's cost is compared, not hashed
		}
		binary.LittleEndian.PutUint64(b[16:], uint64(cost))
		h.Write(b[:])
		h.WriteString(ly.Key)
	}
	return h.Sum64() | 1
}

// remember caches the denial d of a call sent at sent, which layer i denied
// (binding is the layer d reports), unless the call can never be admitted
// or i's key appears in another layer of the same limiter (the denial then
// depends on that layer's cost too).
func remember(layers []Layer, i, binding int, d hotlimit.Decision, sent time.Duration) {
	ly := layers[i]
	c := ly.Limiter.cache
	if c == nil || d.RetryAfter == hotlimit.Never {
		return
	}
	for j, other := range layers {
		if j != i && other.Limiter == ly.Limiter && other.Key == ly.Key {
			return
		}
	}
	c.put(ly.Key, denial{
		until: sent + d.RetryAfter, resetAt: sent + d.ResetAfter,
		cost: ly.Cost, rem: d.Remaining, limit: d.Limit, binding: binding,
		shape: shapeOf(c.seed, layers, i),
	})
}

// sentAt returns the instant a call is sent, on the clock of the first
// layer that has a cache (every cache reads the same monotonic clock
// outside tests), or 0 when none has.
func sentAt(layers []Layer) time.Duration {
	for _, ly := range layers {
		if c := ly.Limiter.cache; c != nil {
			return c.now()
		}
	}
	return 0
}

// localDenial answers a call from the two-tier caches: a layer holding a
// live denial of the same call (the same layers, keys and costs) denies it
// without a round trip. A larger cost is not the same call: it needs
// longer than the cached RetryAfter, which Redis alone can say. A call in which some layer could never
// be admitted (a cost above its limit) is never answered here: Redis
// answers it with RetryAfter = Never, which no cached denial records.
func localDenial(layers []Layer) (hotlimit.Decision, int, bool) {
	for _, ly := range layers {
		if ly.Cost > ly.Limiter.spec.limit || ly.Cost < 0 {
			return hotlimit.Decision{}, -1, false
		}
	}
	for i, ly := range layers {
		c := ly.Limiter.cache
		if c == nil {
			continue
		}
		now := c.now()
		den, ok := c.get(ly.Key, now)
		if !ok || ly.Cost != den.cost || den.shape != shapeOf(c.seed, layers, i) {
			continue
		}
		if h := layers[0].Limiter.hooks; h != nil && h.LocalDenial != nil {
			h.LocalDenial(ly.Limiter.name)
		}
		return hotlimit.Decision{
			Limit: den.limit, Remaining: den.rem,
			RetryAfter: den.until - now, ResetAfter: max(0, den.resetAt-now),
		}, den.binding, true
	}
	return hotlimit.Decision{}, -1, false
}

// forgetDenials empties the caches of the layers' limiters: a call found
// the server unreachable, and it may come back without the state the
// cached denials describe.
func forgetDenials(layers []Layer) {
	for _, ly := range layers {
		if c := ly.Limiter.cache; c != nil {
			c.clear()
		}
	}
}
