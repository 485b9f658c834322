// A differential test of the rate-limit header fields: every response of
// a three-layer middleware (group, global, identity layer) is compared
// with what independent limiters of the same policies, asked one layer at
// a time, say the all-or-nothing decision and each layer's state are.

package httplimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/hotlimit/hotlimit/admission"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/hotlimit/hotlimit/internal/layeroracle"
	"github.com/hotlimit/hotlimit/internal/sfv"
)

// TestOracleFields drives a middleware whose group, global and identity
// layers take every combination of algorithms, at random costs and clock
// steps, and checks every response's status, Retry-After, RateLimit,
// RateLimit-Policy and X-RateLimit-* against the oracle.
func TestOracleFields(t *testing.T) {
	names := layeroracle.Algorithms
	for _, ga := range names {
		for _, ia := range names {
			t.Run(ga+"+"+ia, func(t *testing.T) {
				oracleRun(t, layeroracle.Policy(ga, 0), layeroracle.Policy(ia, 0), layeroracle.Policy(names[(len(ga)+len(ia))%len(names)], 0), false, httplimit.HeadersBoth, 1)
			})
		}
	}
}

// TestOracleFieldsWrapped is TestOracleFields through a Backend that is
// not a *Local, with the global and
// identity layers costing 2, and ProblemDetails bodies.
func TestOracleFieldsWrapped(t *testing.T) {
	names := layeroracle.Algorithms
	for i, ga := range names {
		ia := names[(i+3)%len(names)]
		t.Run(ga+"+"+ia, func(t *testing.T) {
			oracleRun(t, layeroracle.Policy(ga, 0), layeroracle.Policy(ia, 0), layeroracle.Policy(names[(i+1)%len(names)], 0), true, httplimit.HeadersBoth, 2)
		})
	}
}

// TestOracleFieldsLegacy is TestOracleFields with HeadersLegacy alone, for
// which the pipeline asks for no layer states (hotlimit.AllowLayersState
// without states),
// with the global and identity layers costing 2.
func TestOracleFieldsLegacy(t *testing.T) {
	names := layeroracle.Algorithms
	for i, ga := range names {
		ia := names[(i+1)%len(names)]
		t.Run(ga+"+"+ia, func(t *testing.T) {
			oracleRun(t, layeroracle.Policy(ga, 0), layeroracle.Policy(ia, 0), layeroracle.Policy(names[(i+4)%len(names)], 0), false, httplimit.HeadersLegacy, 2)
		})
	}
}

// wrappedLocal is a Backend that is not a *Local.
type wrappedLocal struct{ *admission.Local }

// oracleRun drives one middleware against the oracle. The global and
// identity layers cost layerCost each (the group's layer, a random
// CostFunc price); wrap hides the *Local behind a Backend of another
// type.
func oracleRun(t *testing.T, gp, ip, glp hotlimit.Policy, wrap bool, headers httplimit.HeaderMode, layerCost int64) {
	clock := hotlimit.NewManualClock()
	clock.Set(1000*time.Second + 250*time.Millisecond)
	var last admission.Event // the hook's event of the latest request
	cfg := httplimit.Config{
		Limits: map[string]hotlimit.Policy{"grp": gp, "glob": glp, "per-ip": ip},
		Groups: []httplimit.Group{{Name: "api", Limit: "grp", CostFunc: func(r *http.Request) (int64, error) {
			return strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
		}}},
		DefaultGroup:   "api",
		Key:            httplimit.TokenKey("Authorization"),
		Global:         "glob",
		GlobalCost:     layerCost,
		Identities:     []httplimit.IdentityLimit{{Limit: "per-ip", Key: httplimit.IPKey(nil), Cost: layerCost}},
		Hook:           func(ev admission.Event) { last = ev },
		Headers:        headers,
		ProblemDetails: wrap,
		Wait:           func(context.Context, time.Duration) error { return nil },
	}
	var local *admission.Local
	cfg.Backend = func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
		b, err := admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))(limits)
		if err != nil {
			return nil, err
		}
		local = b.(*admission.Local)
		if wrap {
			return wrappedLocal{local}, nil
		}
		return local, nil
	}
	m, err := httplimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	layers, err := layeroracle.NewLayers(clock, layeroracle.Spec{Name: "grp", Policy: gp}, layeroracle.Spec{Name: "glob", Policy: glp}, layeroracle.Spec{Name: "per-ip", Policy: ip})
	if err != nil {
		t.Fatal(err)
	}
	defer layeroracle.Close(layers)
	layers[1].Cost, layers[2].Cost = layerCost, layerCost
	rng := rand.New(rand.NewPCG(uint64(len(t.Name())), 7))
	seen := map[int]int{}
	defer func() {
		if !t.Failed() && (seen[200] == 0 || seen[429] == 0 || seen[403] == 0) {
			t.Errorf("statuses seen %v: the run does not cover 200, 429 and 403", seen)
		}
	}()
	for step := range 300 {
		// Time moves, and now and then a layer's policy changes (in the
		// oracle too).
		if err := layeroracle.Perturb(rng, clock, layers, 20, local.Classes().SetPolicy); err != nil {
			t.Fatal(err)
		}
		cost := rng.Int64N(layers[0].Lim.Describe().Limit + 2) // 0 … capacity+1
		if rng.IntN(4) != 0 {
			cost = 1
		}
		layers[0].Cost = cost
		v := layeroracle.Decide("k", layers)
		allowed, never, wait, st := v.Allowed, v.Never, v.Wait, v.States

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
		if wrap && wantStatus != 200 {
			// ProblemDetails (on with wrap): violated-policies names the
			// layers short of the request's cost there.
			var body struct {
				Status   int      `json:"status"`
				Violated []string `json:"violated-policies"`
			}
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body.Status != wantStatus {
				t.Fatalf("%s: problem body %+v: %v", where, body, err)
			}
			var want []string
			for i, l := range layers {
				if st[i].Remaining < l.Cost {
					want = append(want, l.Name)
				}
			}
			if !slices.Equal(body.Violated, want) {
				t.Fatalf("%s: violated-policies %q, oracle %q (%+v)", where, body.Violated, want, st)
			}
		}
		// The hook's event describes the same decision: its outcome, the
		// binding layer's limit and algorithm, and that layer's Remaining.
		wantOutcome := admission.OutcomeAllowed
		switch wantStatus {
		case 429:
			wantOutcome = admission.OutcomeDenied
		case 403:
			wantOutcome = admission.OutcomeDeniedNever // it can never pass
		}
		if b := layers[v.Binding]; last.Outcome != wantOutcome || last.Limit != b.Name || last.Decision.Remaining != st[v.Binding].Remaining ||
			last.Decision.Allowed != allowed || last.Group != "api" || last.Algorithm != b.Lim.Describe().Algorithm.String() {
			t.Fatalf("%s: hook event %v %q %+v, oracle %v %q remaining %d", where, last.Outcome, last.Limit, last.Decision, wantOutcome, b.Name, st[v.Binding].Remaining)
		}
		ra := res.Header.Get("Retry-After")
		if wantStatus == 429 {
			if want := strconv.FormatInt(max(1, layeroracle.CeilSeconds(wait)), 10); ra != want {
				t.Fatalf("%s: Retry-After %q, oracle %s", where, ra, want)
			}
		} else if ra != "" {
			t.Fatalf("%s: Retry-After %q on a %d", where, ra, wantStatus)
		}

		if headers == httplimit.HeadersLegacy {
			if res.Header.Get("RateLimit") != "" || res.Header.Get("RateLimit-Policy") != "" {
				t.Fatalf("%s: HeadersLegacy wrote %v", where, res.Header)
			}
		} else {
			pol, err := sfv.ParseList(res.Header.Get("RateLimit-Policy"))
			if err != nil || len(pol) != len(layers) {
				t.Fatalf("%s: RateLimit-Policy %q: %v", where, res.Header.Get("RateLimit-Policy"), err)
			}
			rl, err := sfv.ParseList(res.Header.Get("RateLimit"))
			if err != nil || len(rl) != len(layers) {
				t.Fatalf("%s: RateLimit %q: %v", where, res.Header.Get("RateLimit"), err)
			}
			for i, l := range layers {
				if pol[i].Value.Kind != sfv.String || pol[i].Value.Str != l.Name ||
					rl[i].Value.Kind != sfv.String || rl[i].Value.Str != l.Name {
					t.Fatalf("%s: item %d: names %+v %+v, want %q", where, i, pol[i].Value, rl[i].Value, l.Name)
				}
				q, _ := pol[i].Params.Get("q")
				if q.Kind != sfv.Integer || q.Int != l.Lim.Describe().Limit {
					t.Fatalf("%s: %s q=%+v, want %d", where, l.Name, q, l.Lim.Describe().Limit)
				}
				rv, ok := rl[i].Params.Get("r")
				if !ok || rv.Kind != sfv.Integer || rv.Int != st[i].Remaining || rv.Int > q.Int {
					t.Fatalf("%s: %s r=%+v, oracle %d (RateLimit %q)", where, l.Name, rv, st[i].Remaining, res.Header.Get("RateLimit"))
				}
				tv, hasT := rl[i].Params.Get("t")
				if st[i].Next == 0 {
					if hasT {
						t.Fatalf("%s: %s t=%d on a full limit", where, l.Name, tv.Int)
					}
					continue
				}
				if !hasT || tv.Kind != sfv.Integer || tv.Int != layeroracle.CeilSeconds(st[i].Next) || tv.Int < 1 {
					t.Fatalf("%s: %s t=%+v (present %v), oracle %v (RateLimit %q)", where, l.Name, tv, hasT, st[i].Next, res.Header.Get("RateLimit"))
				}
				if wantStatus == 429 && st[i].Remaining < l.Cost {
					if n, _ := strconv.ParseInt(ra, 10, 64); n < tv.Int {
						t.Fatalf("%s: Retry-After %d earlier than exceeded %s's t=%d", where, n, l.Name, tv.Int)
					}
				}
			}
		}

		// Legacy fields: the binding layer's capacity and remaining; Reset
		// is Retry-After on a 429, else the time until every layer is full.
		lim, rem, rst := res.Header.Get("X-RateLimit-Limit"), res.Header.Get("X-RateLimit-Remaining"), res.Header.Get("X-RateLimit-Reset")
		b := layers[v.Binding]
		if lim != strconv.FormatInt(b.Lim.Describe().Limit, 10) || rem != strconv.FormatInt(st[v.Binding].Remaining, 10) {
			t.Fatalf("%s: X-RateLimit-Limit %q, -Remaining %q; the binding layer %s has %d of %d (%+v)", where, lim, rem, b.Name, st[v.Binding].Remaining, b.Lim.Describe().Limit, st)
		}
		var full time.Duration
		for _, s := range st {
			full = max(full, s.ResetAfter)
		}
		wantReset := strconv.FormatInt(layeroracle.CeilSeconds(full), 10)
		if wantStatus == 429 {
			wantReset = ra
		}
		if rst != wantReset {
			t.Fatalf("%s: X-RateLimit-Reset %q, oracle %s", where, rst, wantReset)
		}
	}
}
