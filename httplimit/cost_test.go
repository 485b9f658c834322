package httplimit

import (
	"errors"
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestCostFunc: a request's cost comes from an earlier middleware through
// the context; 0 is free; above the capacity it can never pass (403); a
// negative cost, a failing CostFunc or a missing required cost is refused
// with 400 and admission.OutcomeCostInvalid, except under DryRun, which lets it
// through; the global layer keeps GlobalCost.
func TestCostFunc(t *testing.T) {
	var ev admission.Event
	cfg := Config{
		Limits: map[string]hotlimit.Policy{
			"gql": hotlimit.FixedWindow{Limit: 10, Window: time.Hour},
			"all": hotlimit.FixedWindow{Limit: 100, Window: time.Hour},
		},
		Groups: []Group{
			{Name: "graphql", Patterns: []string{"/graphql"}, Limit: "gql", CostFunc: CostFromContext(1)},
			{Name: "strict", Patterns: []string{"/strict"}, Limit: "gql", CostFunc: CostFromContext(-1)},
			{Name: "broken", Patterns: []string{"/broken"}, Limit: "gql", CostFunc: func(*http.Request) (int64, error) {
				return 0, errors.New("query does not parse")
			}},
		},
		DefaultGroup: "graphql",
		Global:       "all",
		Key:          TokenKey("Authorization"),
		Hook:         func(e admission.Event) { ev = e },
	}
	hs := newHarness(t, cfg)
	send := func(path, cost string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", path, nil)
		r.Header.Set("Authorization", "Bearer "+token)
		if cost != "" {
			n, _ := strconv.ParseInt(cost, 10, 64)
			r = r.WithContext(WithCost(r.Context(), n)) // what a pricing middleware does
		}
		w := httptest.NewRecorder()
		hs.h.ServeHTTP(w, r)
		return w
	}
	id := tokenIdentity(t, token)
	left := func(limit, group string) int64 {
		return hs.local(t).Classes().Class(limit).Check(hs.m.LayerKey(id, group), 0).Remaining
	}
	for _, tc := range []struct {
		path, cost string
		status     int
		outcome    admission.Outcome
		gql, all   int64 // Remaining afterwards
		err        string
	}{
		{"/graphql", "4", 200, admission.OutcomeAllowed, 6, 99, ""},
		{"/graphql", "", 200, admission.OutcomeAllowed, 5, 98, ""},  // no price: the default, 1
		{"/graphql", "0", 200, admission.OutcomeAllowed, 5, 97, ""}, // free in its group, not in the global layer
		{"/graphql", "6", 429, admission.OutcomeDenied, 5, 97, ""},
		{"/graphql", "11", 403, admission.OutcomeDeniedNever, 5, 97, ""}, // above the capacity: never
		{"/graphql", "9223372036854775807", 403, admission.OutcomeDeniedNever, 5, 97, ""},
		{"/graphql", "-1", 400, admission.OutcomeCostInvalid, 5, 97, ErrBadCost.Error()},
		{"/strict", "", 400, admission.OutcomeCostInvalid, 5, 97, ErrNoCost.Error()}, // a price is required
		{"/broken", "", 400, admission.OutcomeCostInvalid, 5, 97, "does not parse"},
		{"/graphql", "5", 200, admission.OutcomeAllowed, 0, 96, ""},
	} {
		w := send(tc.path, tc.cost)
		if w.Code != tc.status || ev.Outcome != tc.outcome || left("gql", "graphql") != tc.gql || left("all", "") != tc.all {
			t.Fatalf("%s cost %q: %d %v, Remaining %d/%d; want %d %v, %d/%d (event %+v)", tc.path, tc.cost,
				w.Code, ev.Outcome, left("gql", "graphql"), left("all", ""), tc.status, tc.outcome, tc.gql, tc.all, ev)
		}
		if tc.status == 400 {
			if ev.Err == nil || !strings.Contains(ev.Err.Error(), tc.err) || ev.IdentityKind != "tok" || strings.TrimSpace(w.Body.String()) != `{"error":"rate_limit_cost_invalid"}` || w.Header().Get("RateLimit") != "" {
				t.Fatalf("%s cost %q: body %s, headers %v, Err %v", tc.path, tc.cost, w.Body, w.Header(), ev.Err)
			}
		}
	}
	if c := hs.m.Counts()[0].Counts; c[admission.OutcomeCostInvalid] != 1 {
		t.Errorf("graphql counts %v: want one admission.OutcomeCostInvalid (the negative cost)", c)
	}

	cfg.DryRun = true
	hs = newHarness(t, cfg)
	if w := send("/broken", ""); w.Code != 200 || ev.Outcome != admission.OutcomeDryRunDenied || ev.Err == nil {
		t.Errorf("dry run, failing CostFunc: %d %+v; want it let through as admission.OutcomeDryRunDenied", w.Code, ev)
	}
}
