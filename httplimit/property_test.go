package httplimit

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestRetryAfterNeverEarly runs random traffic from one client through a
// group layer and a global layer of random algorithms on a ManualClock,
// and checks the promises of the headers:
//   - after a 429, waiting Retry-After seconds the same request is
//     admitted, and Retry-After is never earlier than the t of an item
//     whose r is below the request's cost there (a limit it exceeded);
//   - a request that can never pass gets 403 and no Retry-After;
//   - each item's t is when that limit's next unit comes back, to the
//     second: after t−1 seconds its r has not grown, after t it has.
func TestRetryAfterNeverEarly(t *testing.T) {
	policies := []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerSecond(3), Burst: 2},
		hotlimit.TokenBucket{Rate: hotlimit.PerMinute(10), Burst: 5},
		hotlimit.FixedWindow{Limit: 4, Window: 10 * time.Second},
		hotlimit.SlidingWindow{Limit: 5, Window: 7 * time.Second},
		hotlimit.SlidingLog{Limit: 3, Window: 5 * time.Second},
		hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(2), Capacity: 2},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 60 {
		gp, glp := policies[rng.IntN(len(policies))], policies[rng.IntN(len(policies))]
		cost := int64(1 + rng.IntN(2))
		hs := newHarness(t, Config{
			Limits:       map[string]hotlimit.Policy{"grp": gp, "all": glp},
			Groups:       []Group{{Name: "g", Limit: "grp", Cost: cost}},
			DefaultGroup: "g",
			Global:       "all",
			Key:          TokenKey("Authorization"),
		})
		id := tokenIdentity(t, token)
		layer := map[string]struct {
			key  string
			cost int64
		}{"grp": {hs.m.LayerKey(id, "g"), cost}, "all": {hs.m.LayerKey(id, ""), 1}}
		remaining := func(name string) int64 {
			return hs.local(t).Classes().Class(name).Check(layer[name].key, 0).Remaining
		}
		hs.clock.Advance(time.Duration(rng.Int64N(int64(10 * time.Second))))
		for step := range 40 {
			w := hs.do("/", token)
			items := parseRateLimitItems(t, w.Header().Get("RateLimit"))
			where := func() string {
				return "iter " + strconv.Itoa(iter) + " step " + strconv.Itoa(step) + " (" +
					w.Header().Get("RateLimit") + ", Retry-After " + w.Header().Get("Retry-After") + ")"
			}
			switch w.Code {
			case http.StatusForbidden:
				if w.Header().Get("Retry-After") != "" {
					t.Fatalf("%s: Retry-After on a request that can never pass", where())
				}
				continue
			case http.StatusTooManyRequests:
				ra, err := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
				if err != nil {
					t.Fatalf("%s: %v", where(), err)
				}
				for name, it := range items {
					if it.r < layer[name].cost && it.t > ra {
						t.Fatalf("%s: Retry-After before the t of %q, a limit the request exceeded", where(), name)
					}
				}
				hs.clock.Advance(time.Duration(ra) * time.Second)
				if w2 := hs.do("/", token); w2.Code != http.StatusOK {
					t.Fatalf("%s (%T / %T, cost %d): waited Retry-After, still %d %q", where(), gp, glp, cost, w2.Code, w2.Header().Get("RateLimit"))
				}
				continue
			}
			name := []string{"grp", "all"}[rng.IntN(2)]
			it, ok := items[name]
			if !ok || it.t < 0 || rng.IntN(3) == 0 {
				hs.clock.Advance(time.Duration(rng.Int64N(int64(3 * time.Second))))
				continue
			}
			hs.clock.Advance(time.Duration(it.t-1) * time.Second)
			if r := remaining(name); r != it.r {
				t.Fatalf("%s: %q has %d units %d s later, before its t of %d s", where(), name, r, it.t-1, it.t)
			}
			hs.clock.Advance(time.Second)
			if r := remaining(name); r <= it.r {
				t.Fatalf("%s: %q has %d units after its t of %d s, want more than %d", where(), name, r, it.t, it.r)
			}
		}
	}
}
