// A differential test of the rate-limit header fields: every response of
// a three-layer middleware (group, global, identity layer) is compared
// with what independent limiters of the same policies, asked one layer at
// a time, say the all-or-nothing decision and each layer's state are.

package httplimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/hotlimit/hotlimit/internal/sfv"
)

// oraclePolicies are small policies of every algorithm, so a short run
// crosses refusals, refills and window ends.
func oraclePolicies() map[string]hotlimit.Policy {
	return map[string]hotlimit.Policy{
		"TokenBucket":   hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 3, Per: 2 * time.Second}, Burst: 4},
		"LeakyBucket":   hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 2, Per: 3 * time.Second}, Capacity: 3},
		"FixedWindow":   hotlimit.FixedWindow{Limit: 5, Window: 7 * time.Second},
		"SlidingWindow": hotlimit.SlidingWindow{Limit: 6, Window: 5 * time.Second},
		"SlidingLog":    hotlimit.SlidingLog{Limit: 4, Window: 6 * time.Second},
	}
}

// oracleVariants are other policies of each algorithm, for SetPolicy.
func oracleVariants() map[string][2]hotlimit.Policy {
	return map[string][2]hotlimit.Policy{
		"TokenBucket":   {hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 3, Per: 2 * time.Second}, Burst: 4}, hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 3 * time.Second}, Burst: 2}},
		"LeakyBucket":   {hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 2, Per: 3 * time.Second}, Capacity: 3}, hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 5, Per: 2 * time.Second}, Capacity: 1}},
		"FixedWindow":   {hotlimit.FixedWindow{Limit: 5, Window: 7 * time.Second}, hotlimit.FixedWindow{Limit: 2, Window: 3 * time.Second}},
		"SlidingWindow": {hotlimit.SlidingWindow{Limit: 6, Window: 5 * time.Second}, hotlimit.SlidingWindow{Limit: 3, Window: 9 * time.Second}},
		"SlidingLog":    {hotlimit.SlidingLog{Limit: 4, Window: 6 * time.Second}, hotlimit.SlidingLog{Limit: 7, Window: 2 * time.Second}},
	}
}

// oracleLayer is one layer as the oracle decides it: its own limiter.
type oracleLayer struct {
	name string
	lim  *hotlimit.Limiter
	cost int64
}

// TestOracleFields drives a middleware whose group, global and identity
// layers take every combination of algorithms, at random costs and clock
// steps, and checks every response's status, Retry-After, RateLimit,
// RateLimit-Policy and X-RateLimit-* against the oracle.
func TestOracleFields(t *testing.T) {
	pols := oraclePolicies()
	names := []string{"TokenBucket", "LeakyBucket", "FixedWindow", "SlidingWindow", "SlidingLog"}
	for _, ga := range names {
		for _, ia := range names {
			t.Run(ga+"+"+ia, func(t *testing.T) {
				oracleRun(t, pols[ga], pols[ia], pols[names[(len(ga)+len(ia))%len(names)]])
			})
		}
	}
}

func oracleRun(t *testing.T, gp, ip, glp hotlimit.Policy) {
	clock := hotlimit.NewManualClock()
	clock.Set(1000*time.Second + 250*time.Millisecond)
	cfg := httplimit.Config{
		Limits: map[string]hotlimit.Policy{"grp": gp, "glob": glp, "per-ip": ip},
		Groups: []httplimit.Group{{Name: "api", Limit: "grp", CostFunc: func(r *http.Request) (int64, error) {
			return strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
		}}},
		DefaultGroup: "api",
		Key:          httplimit.TokenKey("Authorization"),
		Global:       "glob",
		Identities:   []httplimit.IdentityLimit{{Limit: "per-ip", Key: httplimit.IPKey(nil)}},
		Headers:      httplimit.HeadersBoth,
		Wait:         func(context.Context, time.Duration) error { return nil },
		Backend:      httplimit.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)),
	}
	m, err := httplimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	var layers []oracleLayer
	for _, l := range []struct {
		name string
		p    hotlimit.Policy
	}{{"grp", gp}, {"glob", glp}, {"per-ip", ip}} {
		lim, err := hotlimit.New(l.p, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		defer lim.Close()
		layers = append(layers, oracleLayer{name: l.name, lim: lim, cost: 1})
	}
	rng := rand.New(rand.NewPCG(uint64(len(t.Name())), 7))
	seen := map[int]int{}
	defer func() {
		if !t.Failed() && (seen[200] == 0 || seen[429] == 0 || seen[403] == 0) {
			t.Errorf("statuses seen %v: the run does not cover 200, 429 and 403", seen)
		}
	}()
	for step := range 300 {
		if rng.IntN(3) == 0 {
			clock.Advance(time.Duration(rng.Int64N(int64(3 * time.Second))))
		}
		if rng.IntN(20) == 0 {
			// A runtime policy change (same algorithm, other figures), on the
			// middleware's backend and the oracle alike.
			l := layers[rng.IntN(len(layers))]
			np := oracleVariants()[l.lim.Describe().Algorithm.String()][rng.IntN(2)]
			if err := m.Backend().(*httplimit.Local).Classes().SetPolicy(l.name, np); err != nil {
				t.Fatal(err)
			}
			if err := l.lim.SetPolicy(np); err != nil {
				t.Fatal(err)
			}
		}
		cost := rng.Int64N(layers[0].lim.Describe().Limit + 2) // 0 … capacity+1
		if rng.IntN(4) != 0 {
			cost = 1
		}
		layers[0].cost = cost
		// The oracle: check each layer; admit on all only if all admit.
		allowed, never := true, false
		var wait time.Duration
		for _, l := range layers {
			c := l.lim.Check("k", l.cost)
			if !c.Allowed {
				allowed = false
				if c.RetryAfter == hotlimit.Never {
					never = true
				}
				wait = max(wait, c.RetryAfter)
			}
		}
		type state struct {
			r     int64
			next  time.Duration
			reset time.Duration
		}
		st := make([]state, len(layers))
		for i, l := range layers {
			var d hotlimit.Decision
			if allowed {
				d = l.lim.AllowN("k", l.cost)
				if !d.Allowed {
					t.Fatalf("step %d: oracle layer %s refused after Check admitted", step, l.name)
				}
			} else {
				d = l.lim.Check("k", 0)
			}
			st[i].r, st[i].reset = d.Remaining, d.ResetAfter
			if d.Remaining < d.Limit {
				st[i].next = l.lim.Check("k", d.Remaining+1).RetryAfter
			}
		}

		r := httptest.NewRequest("GET", "/x", nil)
		r.RemoteAddr = "192.0.2.7:1234"
		r.Header.Set("Authorization", "Bearer tok-1")
		r.Header.Set("X-Cost", strconv.FormatInt(cost, 10))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		res := w.Result()
		where := fmt.Sprintf("step %d (cost %d, now %v)", step, cost, clock.Now())

		wantStatus := 200
		switch {
		case never:
			wantStatus = 403
		case !allowed:
			wantStatus = 429
		}
		seen[wantStatus]++
		if res.StatusCode != wantStatus {
			t.Fatalf("%s: status %d, oracle %d", where, res.StatusCode, wantStatus)
		}
		ra := res.Header.Get("Retry-After")
		if wantStatus == 429 {
			if want := strconv.FormatInt(max(1, ceilSec(wait)), 10); ra != want {
				t.Fatalf("%s: Retry-After %q, oracle %s", where, ra, want)
			}
		} else if ra != "" {
			t.Fatalf("%s: Retry-After %q on a %d", where, ra, wantStatus)
		}

		pol, err := sfv.ParseList(res.Header.Get("RateLimit-Policy"))
		if err != nil || len(pol) != len(layers) {
			t.Fatalf("%s: RateLimit-Policy %q: %v", where, res.Header.Get("RateLimit-Policy"), err)
		}
		rl, err := sfv.ParseList(res.Header.Get("RateLimit"))
		if err != nil || len(rl) != len(layers) {
			t.Fatalf("%s: RateLimit %q: %v", where, res.Header.Get("RateLimit"), err)
		}
		for i, l := range layers {
			if pol[i].Value.Kind != sfv.String || pol[i].Value.Str != l.name ||
				rl[i].Value.Kind != sfv.String || rl[i].Value.Str != l.name {
				t.Fatalf("%s: item %d: names %+v %+v, want %q", where, i, pol[i].Value, rl[i].Value, l.name)
			}
			q, _ := pol[i].Params.Get("q")
			if q.Kind != sfv.Integer || q.Int != l.lim.Describe().Limit {
				t.Fatalf("%s: %s q=%+v, want %d", where, l.name, q, l.lim.Describe().Limit)
			}
			rv, ok := rl[i].Params.Get("r")
			if !ok || rv.Kind != sfv.Integer || rv.Int != st[i].r || rv.Int > q.Int {
				t.Fatalf("%s: %s r=%+v, oracle %d (RateLimit %q)", where, l.name, rv, st[i].r, res.Header.Get("RateLimit"))
			}
			tv, hasT := rl[i].Params.Get("t")
			if st[i].next == 0 {
				if hasT {
					t.Fatalf("%s: %s t=%d on a full limit", where, l.name, tv.Int)
				}
				continue
			}
			if !hasT || tv.Kind != sfv.Integer || tv.Int != ceilSec(st[i].next) || tv.Int < 1 {
				t.Fatalf("%s: %s t=%+v (present %v), oracle %v (RateLimit %q)", where, l.name, tv, hasT, st[i].next, res.Header.Get("RateLimit"))
			}
			if wantStatus == 429 && st[i].r < l.cost {
				if n, _ := strconv.ParseInt(ra, 10, 64); n < tv.Int {
					t.Fatalf("%s: Retry-After %d earlier than exceeded %s's t=%d", where, n, l.name, tv.Int)
				}
			}
		}

		// Legacy fields: the binding layer's capacity and remaining; Reset
		// is Retry-After on a 429, else the time until every layer is full.
		lim, rem, rst := res.Header.Get("X-RateLimit-Limit"), res.Header.Get("X-RateLimit-Remaining"), res.Header.Get("X-RateLimit-Reset")
		found := false
		for i, l := range layers {
			if lim == strconv.FormatInt(l.lim.Describe().Limit, 10) && rem == strconv.FormatInt(st[i].r, 10) {
				found = true
			}
		}
		if !found {
			t.Fatalf("%s: X-RateLimit-Limit %q, -Remaining %q describe no layer (%+v)", where, lim, rem, st)
		}
		var full time.Duration
		for _, s := range st {
			full = max(full, s.reset)
		}
		wantReset := strconv.FormatInt(ceilSec(full), 10)
		if wantStatus == 429 {
			wantReset = ra
		}
		if rst != wantReset {
			t.Fatalf("%s: X-RateLimit-Reset %q, oracle %s", where, rst, wantReset)
		}
	}
}

func ceilSec(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
