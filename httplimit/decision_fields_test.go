package httplimit

import (
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestPolicyAfterSetPolicy: after Classes().SetPolicy, RateLimit-Policy
// describes the policy the request was decided under (q and w), as
// RateLimit's r does, and Event.Algorithm names its algorithm.
func TestPolicyAfterSetPolicy(t *testing.T) {
	var alg string
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Hour}},
		Groups:       []Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          TokenKey("Authorization"),
		Hook:         func(ev admission.Event) { alg = ev.Algorithm },
	})
	w := hs.do("/", token)
	if got, want := w.Header().Get("RateLimit-Policy"), `"l";q=5;w=3600`; got != want {
		t.Fatalf("before: RateLimit-Policy %q, want %q", got, want)
	}
	if err := hs.local(t).Classes().SetPolicy("l", hotlimit.FixedWindow{Limit: 20, Window: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		w = hs.do("/", token)
		if got, want := w.Header().Get("RateLimit-Policy"), `"l";q=20;w=7200`; got != want {
			t.Errorf("after SetPolicy, request %d: RateLimit-Policy %q, want %q (RateLimit %q)", i, got, want, w.Header().Get("RateLimit"))
		}
		if alg != "FixedWindow" {
			t.Errorf("after SetPolicy: Event.Algorithm %q", alg)
		}
	}
	checkRateLimitFields(t, w.Header())
}

// steppingClock is a clock that moves by step at every reading: time
// passes between any two readings, as on a real clock, but the same on
// every run.
type steppingClock struct {
	now  atomic.Int64
	step time.Duration
}

func (c *steppingClock) Now() time.Duration { return time.Duration(c.now.Add(int64(c.step))) }

// TestFieldsFromDecision: on a clock that moves between any two readings,
// every RateLimit item's r is the Remaining of the decision the hook
// sees, for every algorithm, and t is that decision's wait for one unit
// more (present exactly when r is below the capacity, and never past
// what the policy can make a client wait for a unit).
func TestFieldsFromDecision(t *testing.T) {
	for _, p := range []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerSecond(4), Burst: 5},
		hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(4), Capacity: 4},
		hotlimit.FixedWindow{Limit: 5, Window: 2 * time.Second},
		hotlimit.SlidingWindow{Limit: 5, Window: 2 * time.Second},
		hotlimit.SlidingLog{Limit: 5, Window: 2 * time.Second},
	} {
		clock := &steppingClock{step: 37 * time.Millisecond}
		clock.now.Store(int64(1000 * time.Second))
		var ev admission.Event
		hs := newHarness(t, Config{
			Limits:       map[string]hotlimit.Policy{"l": p},
			Groups:       []Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          TokenKey("Authorization"),
			Backend:      admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)),
			Hook:         func(e admission.Event) { ev = e },
		})
		pi, _ := hotlimit.Describe(p)
		most := ceilSec(2 * pi.Period()) // a sliding window's unit may take up to two windows
		for i := range 200 {
			w := hs.do("/", token)
			_, r, tt := parseRateLimit(t, w.Header().Get("RateLimit"))
			if r != ev.Decision.Remaining {
				t.Fatalf("%T request %d: r=%d, the decision's Remaining %d (%+v)", p, i, r, ev.Decision.Remaining, ev.Decision)
			}
			if (tt >= 0) != (r < pi.Limit) || tt == 0 || tt > most {
				t.Fatalf("%T request %d: r=%d t=%d of q=%d w=%v", p, i, r, tt, pi.Limit, pi.Period())
			}
		}
	}
}

// TestFieldsConcurrent: on a frozen clock, concurrent admitted requests of
// one client each carry their own decision's r: all distinct. Run with
// -race.
func TestFieldsConcurrent(t *testing.T) {
	for _, p := range []hotlimit.Policy{
		hotlimit.SlidingWindow{Limit: 64, Window: time.Minute},
		hotlimit.SlidingLog{Limit: 64, Window: time.Minute},
	} {
		hs := newHarness(t, Config{
			Limits:       map[string]hotlimit.Policy{"l": p},
			Groups:       []Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          TokenKey("Authorization"),
		})
		seen := make([]bool, 64)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 8 {
					r := httptest.NewRequest("GET", "/", nil)
					r.Header.Set("Authorization", "Bearer "+token)
					w := httptest.NewRecorder()
					hs.m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
					_, rem, _ := parseRateLimit(t, w.Header().Get("RateLimit"))
					mu.Lock()
					if w.Code != http.StatusOK || seen[rem] {
						t.Errorf("%T: status %d, r=%d seen before", p, w.Code, rem)
					}
					seen[rem] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
}
