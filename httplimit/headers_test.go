package httplimit

import (
	"encoding/json"
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/sfv"
)

// TestHeadersFollowDecision drives each algorithm until it denies, and
// checks every response's headers against a reference limiter fed the
// same requests on the same clock: RateLimit r is Remaining, t is when
// the limit's next unit comes back (ceil of Check(r+1).RetryAfter; absent
// when the limit is full), Retry-After is max(1, ceil(RetryAfter)); then
// it advances the clock by exactly t seconds and checks that the retry is
// admitted.
func TestHeadersFollowDecision(t *testing.T) {
	policies := map[string]hotlimit.Policy{
		"tb":    hotlimit.TokenBucket{Rate: hotlimit.PerSecond(3), Burst: 2},
		"tbmin": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(10), Burst: 4},
		"fw":    hotlimit.FixedWindow{Limit: 3, Window: 10 * time.Second},
		"sw":    hotlimit.SlidingWindow{Limit: 3, Window: 7 * time.Second},
		"lb":    hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(2), Capacity: 1},
		"log":   hotlimit.SlidingLog{Limit: 3, Window: 5 * time.Second},
	}
	wantPolicy := map[string]string{
		"log":   `"log";q=3;w=5`,
		"tb":    `"tb";q=2;w=1`,
		"tbmin": `"tbmin";q=4;w=24`,
		"fw":    `"fw";q=3;w=10`,
		"sw":    `"sw";q=3;w=7`,
		"lb":    `"lb";q=2;w=1`,
	}
	for name, pol := range policies {
		t.Run(name, func(t *testing.T) {
			hs := newHarness(t, Config{
				Limits:       map[string]hotlimit.Policy{name: pol},
				Groups:       []Group{{Name: "api", Patterns: []string{"/api"}, Limit: name}},
				DefaultGroup: "api",
				Key:          TokenKey("Authorization"),
			})
			hs.clock.Advance(1234567 * time.Microsecond) // not on a second boundary
			ref, err := hotlimit.New(pol, hotlimit.WithClock(hs.clock), hotlimit.WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			check := func() (hotlimit.Decision, *httptest.ResponseRecorder) {
				t.Helper()
				w := hs.do("/api", token)
				d := ref.Allow("k")
				if got := w.Header().Get("RateLimit-Policy"); got != wantPolicy[name] {
					t.Fatalf("RateLimit-Policy = %q, want %q", got, wantPolicy[name])
				}
				n, r, tt := parseRateLimit(t, w.Header().Get("RateLimit"))
				if n != name || r != d.Remaining {
					t.Fatalf("RateLimit = %q, want name %q r=%d", w.Header().Get("RateLimit"), name, d.Remaining)
				}
				want := int64(-1)
				if d.Remaining < d.Limit {
					want = ceilSec(ref.Check("k", d.Remaining+1).RetryAfter)
				}
				if !d.Allowed && want != ceilSec(d.RetryAfter) {
					t.Fatalf("t = %d on a denial of one unit, RetryAfter %v", want, d.RetryAfter)
				}
				if tt != want {
					t.Fatalf("t = %d, want %d (decision %+v)", tt, want, d)
				}
				if d.Allowed != (w.Code == http.StatusOK) {
					t.Fatalf("status %d for decision %+v", w.Code, d)
				}
				return d, w
			}
			var d hotlimit.Decision
			var w *httptest.ResponseRecorder
			for i := 0; i < 10; i++ {
				if d, w = check(); !d.Allowed {
					break
				}
			}
			if d.Allowed {
				t.Fatal("never denied")
			}
			if got, want := w.Header().Get("Retry-After"), strconv.FormatInt(max(1, ceilSec(d.RetryAfter)), 10); got != want {
				t.Fatalf("Retry-After = %q, want %q (RetryAfter %v)", got, want, d.RetryAfter)
			}
			var body map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body["error"] != "rate_limit_exceeded" || body["retry_after"] != float64(max(1, ceilSec(d.RetryAfter))) {
				t.Fatalf("body = %s", w.Body)
			}
			_, _, tt := parseRateLimit(t, w.Header().Get("RateLimit"))
			// One nanosecond before the true wait is still denied; at
			// ceil(t) seconds the retry passes.
			hs.clock.Advance(d.RetryAfter - 1)
			if d2, _ := check(); d2.Allowed {
				t.Fatalf("admitted 1ns before RetryAfter %v", d.RetryAfter)
			}
			hs.clock.Advance(-(d.RetryAfter - 1))
			hs.clock.Advance(time.Duration(tt) * time.Second)
			if d3, w3 := check(); !d3.Allowed || w3.Code != http.StatusOK {
				t.Fatalf("retry after t=%ds denied: %+v", tt, d3)
			}
		})
	}
}

func TestLegacyAndBothHeaders(t *testing.T) {
	wall := time.Unix(1_700_000_000, 250_000_000)
	for _, tt := range []struct {
		mode       HeaderMode
		reset      ResetMode
		ietf, leg  bool
		wantReset0 string // X-RateLimit-Reset after the first request
	}{
		{HeadersLegacy, ResetSeconds, false, true, "20"},
		{HeadersLegacy, ResetEpoch, false, true, "1700000021"}, // ceil(wall + 20 s)
		{HeadersBoth, ResetSeconds, true, true, "20"},
		{HeadersNone, ResetSeconds, false, false, ""},
		{HeadersIETF, ResetSeconds, true, false, ""},
	} {
		hs := newHarness(t, Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(3), Burst: 3}},
			Groups:       []Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          TokenKey("Authorization"),
			Headers:      tt.mode,
			Reset:        tt.reset,
			Now:          func() time.Time { return wall },
		})
		w := hs.do("/", token)
		h := w.Header()
		if (h.Get("RateLimit") != "") != tt.ietf || (h.Get("RateLimit-Policy") != "") != tt.ietf {
			t.Errorf("mode %d: RateLimit %q, RateLimit-Policy %q", tt.mode, h.Get("RateLimit"), h.Get("RateLimit-Policy"))
		}
		if !tt.leg {
			if h.Get("X-RateLimit-Limit") != "" {
				t.Errorf("mode %d: legacy headers present", tt.mode)
			}
			continue
		}
		if h.Get("X-RateLimit-Limit") != "3" || h.Get("X-RateLimit-Remaining") != "2" || h.Get("X-RateLimit-Reset") != tt.wantReset0 {
			t.Errorf("mode %d reset %d: X-RateLimit-* = %q %q %q, want 3 2 %s", tt.mode, tt.reset,
				h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"), tt.wantReset0)
		}
	}
}

// TestNeverPasses: a request whose cost exceeds the limit can never pass:
// 403 (not 429: nothing to wait for), without Retry-After, no t, and a
// body that says why.
func TestNeverPasses(t *testing.T) {
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}},
		Groups:       []Group{{Name: "huge", Limit: "l", CostFunc: fixedCost(6)}},
		DefaultGroup: "huge",
		Key:          TokenKey("Authorization"),
	})
	w := hs.do("/", token)
	if w.Code != http.StatusForbidden || hs.calls != 0 {
		t.Fatalf("status %d, calls %d", w.Code, hs.calls)
	}
	if _, ok := w.Header()["Retry-After"]; ok {
		t.Errorf("Retry-After = %q on a request that can never pass", w.Header().Get("Retry-After"))
	}
	if _, r, tt := parseRateLimit(t, w.Header().Get("RateLimit")); r != 5 || tt != -1 {
		t.Errorf("RateLimit = %q, want r=5 and no t", w.Header().Get("RateLimit"))
	}
	if strings.TrimSpace(w.Body.String()) != `{"error":"rate_limit_cost_exceeds_limit"}` {
		t.Errorf("body = %s", w.Body)
	}
}

// TestBindingSameCapacity: the group and the global limits have the same
// capacity (3) but different windows, so Decision.Limit cannot say which
// one bound. The global binds (the group's window has more left):
// Event.Limit names it, and RateLimit has one item per limit with its own
// r and t. With a backend that reports neither the binding layer nor the
// states, the middleware falls back to one item named after the group's
// limit, without t on an admission, and Event.Limit names none.
func TestBindingSameCapacity(t *testing.T) {
	limits := map[string]hotlimit.Policy{
		"g":   hotlimit.FixedWindow{Limit: 3, Window: time.Hour},
		"all": hotlimit.FixedWindow{Limit: 3, Window: time.Minute},
	}
	for _, reporting := range []bool{true, false} {
		var events []admission.Event
		cfg := Config{
			Limits:       limits,
			Groups:       []Group{{Name: "g", Limit: "g"}},
			DefaultGroup: "g",
			Global:       "all",
			Key:          TokenKey("Authorization"),
			Hook:         func(ev admission.Event) { events = append(events, ev) },
		}
		clock := hotlimit.NewManualClock()
		clock.Set(1000 * time.Second)
		if !reporting {
			cfg.Backend = func(l map[string]hotlimit.Policy) (admission.Backend, error) {
				b, err := newLocal(l, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
				return plainBackend{b}, err
			}
		} else {
			cfg.Backend = admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
		}
		hs := newHarness(t, cfg)
		// One request's worth already spent in the global window, by the
		// key the middleware gives the global layer.
		global := hs.m.LayerKey(tokenIdentity(t, token), "")
		hs.m.Backend().(interface {
			Classes() *hotlimit.Classes
		}).Classes().Class("all").AllowN(global, 1)
		w := hs.do("/", token)
		if w.Code != http.StatusOK {
			t.Fatalf("reporting=%v: %d", reporting, w.Code)
		}
		// The group's hour window ends at 3600 s, the global minute at
		// 1020 s: each item's t is its own window's end.
		want, wantRL := "all", `"g";r=2;t=2600, "all";r=1;t=20`
		if !reporting {
			// A tie on capacity: the header's one item is named by the
			// fallback; the Event names no limit, since the backend said
			// none bound (Result.Limit), as grpclimit's Event does.
			want, wantRL = "", `"g";r=1`
		}
		if got := w.Header().Get("RateLimit"); got != wantRL {
			t.Errorf("reporting=%v: RateLimit = %q, want %q", reporting, got, wantRL)
		}
		if len(events) != 1 || events[0].Limit != want {
			t.Errorf("reporting=%v: events %+v, want one naming %q", reporting, events, want)
		}
	}
}

// checkRateLimitFields parses the IETF fields of h strictly (RFC 9651)
// and checks their shape: RateLimit-Policy members are Strings with
// Integer q > 0 and w > 0, with distinct names; RateLimit members are
// Strings, each naming a different policy, with Integer r ≥ 0 and, if
// present, t ≥ 0. Every parameter is an Integer.
func checkRateLimitFields(t *testing.T, h http.Header) {
	t.Helper()
	pol, err := sfv.ParseList(joinLines(h.Values("RateLimit-Policy")))
	if err != nil || len(pol) == 0 {
		t.Fatalf("RateLimit-Policy %q: %v", h.Values("RateLimit-Policy"), err)
	}
	names := map[string]bool{}
	for _, m := range pol {
		q, _ := m.Params.Get("q")
		w, _ := m.Params.Get("w")
		if m.Value.Kind != sfv.String || names[m.Value.Str] || q.Kind != sfv.Integer || q.Int <= 0 || w.Kind != sfv.Integer || w.Int <= 0 || !integerParams(m) {
			t.Fatalf("RateLimit-Policy %q: member %+v", h.Values("RateLimit-Policy"), m)
		}
		names[m.Value.Str] = true
	}
	rl, err := sfv.ParseList(joinLines(h.Values("RateLimit")))
	if err != nil || len(rl) == 0 || len(rl) > len(pol) {
		t.Fatalf("RateLimit %q: %v", h.Values("RateLimit"), err)
	}
	for _, m := range rl {
		r, _ := m.Params.Get("r")
		if m.Value.Kind != sfv.String || !names[m.Value.Str] || r.Kind != sfv.Integer || r.Int < 0 || !integerParams(m) {
			t.Fatalf("RateLimit %q: member %+v", h.Values("RateLimit"), m)
		}
		delete(names, m.Value.Str) // each policy once
		if tt, ok := m.Params.Get("t"); ok && tt.Int < 0 {
			t.Fatalf("RateLimit %q: t %+v", h.Values("RateLimit"), tt)
		}
	}
}

// integerParams reports whether every parameter of m is an Integer.
func integerParams(m sfv.Member) bool {
	for _, p := range m.Params {
		if p.Value.Kind != sfv.Integer {
			return false
		}
	}
	return true
}

func joinLines(v []string) string {
	s := ""
	for i, l := range v {
		if i > 0 {
			s += ", "
		}
		s += l
	}
	return s
}

// TestRateLimitFieldsStrict sends allowed, denied and never-passing
// requests through every algorithm, with a global layer, and parses the
// fields with the strict parser. The policies include capacities beyond
// the 15 digits of an RFC 9651 Integer, which hotlimit accepts.
func TestRateLimitFieldsStrict(t *testing.T) {
	huge := hotlimit.Rate{N: 1_000_000_000, Per: time.Second}
	policies := map[string]hotlimit.Policy{
		"tb":        hotlimit.TokenBucket{Rate: hotlimit.PerSecond(3), Burst: 2},
		"fw":        hotlimit.FixedWindow{Limit: 3, Window: 10 * time.Second},
		"sw":        hotlimit.SlidingWindow{Limit: 3, Window: 7 * time.Second},
		"lb":        hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(2), Capacity: 1},
		"log":       hotlimit.SlidingLog{Limit: 3, Window: 5 * time.Second},
		"huge-tb":   hotlimit.TokenBucket{Rate: huge, Burst: 2_000_000_000_000_000},
		"huge-lb":   hotlimit.LeakyBucket{Rate: huge, Capacity: 2_000_000_000_000_000},
		"huge.fw_1": hotlimit.FixedWindow{Limit: 1<<43 - 1, Window: time.Hour},
	}
	for name := range policies {
		for _, global := range []string{"", "tb", "huge-tb"} {
			for _, cost := range []int64{1, 4} { // 4 exceeds the small ones: never passes
				hs := newHarness(t, Config{
					Limits:       policies,
					Groups:       []Group{{Name: "api", Limit: name, CostFunc: fixedCost(cost)}},
					DefaultGroup: "api",
					Global:       global,
					Key:          TokenKey("Authorization"),
					Headers:      HeadersBoth,
				})
				for range 4 {
					w := hs.do("/", token)
					checkRateLimitFields(t, w.Header())
				}
			}
		}
	}
}

// TestLegacyResetOnNever: HeaderMode promises the legacy fields on every
// limited response, a 403 (a cost above the capacity: no Retry-After)
// included. Its X-RateLimit-Reset is the time until the limit is full
// again, as on an admission.
func TestLegacyResetOnNever(t *testing.T) {
	wall := time.Unix(1_700_000_000, 250_000_000)
	for _, tt := range []struct {
		reset       ResetMode
		fresh, want string
	}{
		{ResetSeconds, "0", "20"},                // the window [960 s, 1020 s) ends 20 s after 1000 s
		{ResetEpoch, "1700000001", "1700000021"}, // ceil(wall), ceil(wall + 20 s)
	} {
		var cost int64
		hs := newHarness(t, Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}},
			Groups:       []Group{{Name: "g", Limit: "l", CostFunc: func(*http.Request) (int64, error) { return cost, nil }}},
			DefaultGroup: "g",
			Key:          TokenKey("Authorization"),
			Headers:      HeadersLegacy,
			Reset:        tt.reset,
			Now:          func() time.Time { return wall },
		})
		cost = 6
		w := hs.do("/", token) // a fresh key: nothing spent, nothing to wait for
		if w.Code != http.StatusForbidden || w.Header().Get("X-RateLimit-Reset") != tt.fresh {
			t.Errorf("fresh: status %d, X-RateLimit-Reset %q, want 403 and %s", w.Code, w.Header().Get("X-RateLimit-Reset"), tt.fresh)
		}
		cost = 1
		hs.do("/", token)
		hs.do("/", token)
		cost = 6
		w = hs.do("/", token)
		h := w.Header()
		if w.Code != http.StatusForbidden {
			t.Fatalf("status %d, want 403", w.Code)
		}
		if h.Get("X-RateLimit-Limit") != "5" || h.Get("X-RateLimit-Remaining") != "3" || h.Get("X-RateLimit-Reset") != tt.want {
			t.Errorf("reset mode %d: X-RateLimit-* = %q %q %q, want 5 3 %s", tt.reset,
				h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"), tt.want)
		}
	}
}
