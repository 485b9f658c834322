package httplimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/sfv"
)

// checkRateLimitFields parses the IETF fields of h strictly (RFC 9651)
// and checks their shape: RateLimit-Policy members are Strings with
// Integer q > 0 and w > 0; RateLimit is one String naming one of them,
// with Integer r ≥ 0 and, if present, t ≥ 0. Every parameter is an
// Integer.
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
		if m.Value.Kind != sfv.String || q.Kind != sfv.Integer || q.Int <= 0 || w.Kind != sfv.Integer || w.Int <= 0 || !integerParams(m) {
			t.Fatalf("RateLimit-Policy %q: member %+v", h.Values("RateLimit-Policy"), m)
		}
		names[m.Value.Str] = true
	}
	rl, err := sfv.ParseList(joinLines(h.Values("RateLimit")))
	if err != nil || len(rl) != 1 {
		t.Fatalf("RateLimit %q: %v", h.Values("RateLimit"), err)
	}
	m := rl[0]
	r, _ := m.Params.Get("r")
	if m.Value.Kind != sfv.String || !names[m.Value.Str] || r.Kind != sfv.Integer || r.Int < 0 || !integerParams(m) {
		t.Fatalf("RateLimit %q: member %+v", h.Values("RateLimit"), m)
	}
	if tt, ok := m.Params.Get("t"); ok && tt.Int < 0 {
		t.Fatalf("RateLimit %q: t %+v", h.Values("RateLimit"), tt)
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
					Groups:       []Group{{Name: "api", Limit: name, Cost: cost}},
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
