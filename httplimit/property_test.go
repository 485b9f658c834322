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
// and checks the promise of the headers: after a 429, waiting Retry-After
// seconds (and, the same, the RateLimit t) the same request is admitted;
// after an admission with r=0, waiting t seconds the next request is
// admitted.
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
		hs.clock.Advance(time.Duration(rng.Int64N(int64(10 * time.Second))))
		for step := range 40 {
			w := hs.do("/", token)
			_, r, tt := parseRateLimit(t, w.Header().Get("RateLimit"))
			var wait int64
			switch {
			case w.Code == http.StatusTooManyRequests:
				ra := w.Header().Get("Retry-After")
				if ra == "" {
					continue // can never pass (cost above a capacity)
				}
				wait, _ = strconv.ParseInt(ra, 10, 64)
				if tt > wait || tt < 0 {
					t.Fatalf("iter %d step %d: t=%d, Retry-After %d", iter, step, tt, wait)
				}
			case r == 0:
				wait = tt
			default:
				hs.clock.Advance(time.Duration(rng.Int64N(int64(3 * time.Second))))
				continue
			}
			hs.clock.Advance(time.Duration(wait) * time.Second)
			if w2 := hs.do("/", token); w2.Code != http.StatusOK {
				t.Fatalf("iter %d step %d (%T / %T, cost %d): waited %d s as told by %q / Retry-After %q, still %d %q",
					iter, step, gp, glp, cost, wait, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"), w2.Code, w2.Header().Get("RateLimit"))
			}
		}
	}
}
