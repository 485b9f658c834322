package httplimit

import (
	"context"
	"encoding/json"
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestSameLimitTwice: when Config.Global names the group's own limit, the
// two layers (two keys, two quotas) get two distinguishable items in both
// fields, each with its own r and t.
func TestSameLimitTwice(t *testing.T) {
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}},
		Groups:       []Group{{Name: "a", Patterns: []string{"/a"}, Limit: "l"}, {Name: "b", Patterns: []string{"/b"}, Limit: "l"}},
		DefaultGroup: "a",
		Global:       "l",
		Key:          TokenKey("Authorization"),
	})
	hs.do("/a", token)
	hs.do("/a", token)
	w := hs.do("/b", token)
	checkRateLimitFields(t, w.Header())
	if got, want := w.Header().Get("RateLimit-Policy"), `"l";q=5;w=60, "l/global";q=5;w=60`; got != want {
		t.Errorf("RateLimit-Policy = %q, want %q", got, want)
	}
	// b's layer has spent 1, the global layer 3; the window ends at
	// 1020 s, 20 s from now.
	if got, want := w.Header().Get("RateLimit"), `"l";r=4;t=20, "l/global";r=2;t=20`; got != want {
		t.Errorf("RateLimit = %q, want %q", got, want)
	}
}

// TestProblemDetails: with Config.ProblemDetails, a refusal by a limit is
// an application/problem+json body of the draft's quota-exceeded type
// that names the limits the request exceeded (both, when both did), and
// a request that can never pass says so with 403; refusals for other
// reasons keep the plain body.
func TestProblemDetails(t *testing.T) {
	hs := newHarness(t, Config{
		Limits: map[string]hotlimit.Policy{
			"one": hotlimit.FixedWindow{Limit: 1, Window: time.Minute},
			"all": hotlimit.FixedWindow{Limit: 2, Window: time.Minute},
		},
		Groups: []Group{
			{Name: "a", Patterns: []string{"/a"}, Limit: "one"},
			{Name: "b", Patterns: []string{"/b"}, Limit: "one"},
			{Name: "huge", Patterns: []string{"/huge"}, Limit: "one", CostFunc: fixedCost(2)},
		},
		DefaultGroup:   "a",
		Global:         "all",
		Key:            TokenKey("Authorization"),
		ProblemDetails: true,
	})
	type problem struct {
		Type     string   `json:"type"`
		Title    string   `json:"title"`
		Status   int      `json:"status"`
		Detail   string   `json:"detail"`
		Violated []string `json:"violated-policies"`
	}
	read := func(w *http.Response, body []byte) problem {
		t.Helper()
		var p problem
		if ct := w.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("Content-Type %q, body %s", ct, body)
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		if p.Type != QuotaExceededType || p.Title == "" || p.Status != w.StatusCode || p.Detail == "" {
			t.Fatalf("problem %+v for status %d", p, w.StatusCode)
		}
		return p
	}
	hs.do("/a", token)
	w := hs.do("/a", token) // a's limit is spent, the global one is not
	if p := read(w.Result(), w.Body.Bytes()); w.Code != 429 || !reflect.DeepEqual(p.Violated, []string{"one"}) {
		t.Errorf("/a: %d %+v", w.Code, p)
	}
	hs.do("/b", token)     // now the global limit is spent too
	w = hs.do("/b", token) // b's limit and the global one are both spent
	if p := read(w.Result(), w.Body.Bytes()); w.Code != 429 || !reflect.DeepEqual(p.Violated, []string{"one", "all"}) {
		t.Errorf("/b: %d %+v", w.Code, p)
	}
	w = hs.do("/huge", "another-token") // costs 2 where 1 is all there is
	if p := read(w.Result(), w.Body.Bytes()); w.Code != 403 || !reflect.DeepEqual(p.Violated, []string{"one"}) || w.Header().Get("Retry-After") != "" {
		t.Errorf("/huge: %d %+v, Retry-After %q", w.Code, p, w.Header().Get("Retry-After"))
	}
	if w = hs.do("/a", ""); w.Code != 429 || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("no key: %d %q: want the plain body", w.Code, w.Header().Get("Content-Type"))
	}
}

// bindingOnly is admission.Local as an admission.Backend that reports the binding layer but
// cannot tell the layers' states (Remaining -1), as a cached denial of
// redislimit's backend does.
type bindingOnly struct{ *admission.Local }

func (b bindingOnly) AllowStates(ctx context.Context, ls []admission.Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	unknown(states)
	return b.Local.AllowStates(ctx, ls, nil)
}

// TestBindingOnlyBackend: a backend that reports the binding layer but not
// the states gets one RateLimit item, the binding layer's, with a t only
// where its Decision says when the next unit comes back: a denial of a
// request that needed exactly one unit more.
func TestBindingOnlyBackend(t *testing.T) {
	clock := hotlimit.NewManualClock()
	clock.Set(1000 * time.Second)
	hs := newHarness(t, Config{
		Limits: map[string]hotlimit.Policy{
			"l":   hotlimit.FixedWindow{Limit: 4, Window: time.Minute},
			"all": hotlimit.FixedWindow{Limit: 100, Window: time.Hour},
		},
		Groups:       []Group{{Name: "one", Patterns: []string{"/one"}, Limit: "l"}, {Name: "three", Patterns: []string{"/three"}, Limit: "l", Cost: 3}},
		DefaultGroup: "one",
		Global:       "all",
		Key:          TokenKey("Authorization"),
		Backend: func(l map[string]hotlimit.Policy) (admission.Backend, error) {
			b, err := newLocal(l, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
			return bindingOnly{b}, err
		},
	})
	for i, c := range []struct{ path, status, rl string }{
		{"/three", "200", `"l";r=1`},
		{"/three", "429", `"l";r=1`}, // needs 3: the Decision tells when 3 come back, not 2
		{"/one", "200", `"l";r=3`},   // another group: another key
		{"/one", "200", `"l";r=2`},
		{"/one", "200", `"l";r=1`},
		{"/one", "200", `"l";r=0`},
		{"/one", "429", `"l";r=0;t=20`}, // needs 1: RetryAfter is the next unit's
	} {
		w := hs.do(c.path, token)
		if got := w.Header().Get("RateLimit"); strconv.Itoa(w.Code) != c.status || got != c.rl {
			t.Errorf("request %d to %s: %d %q, want %s %q", i, c.path, w.Code, got, c.status, c.rl)
		}
	}
}

// TestUnknownStates: states reported as unknown (Remaining -1) are not
// written as items: the field falls back to the binding layer's item.
func TestUnknownStates(t *testing.T) {
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 4, Window: time.Minute}, "all": hotlimit.FixedWindow{Limit: 9, Window: time.Minute}},
		Groups:       []Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Global:       "all",
		Key:          TokenKey("Authorization"),
		Backend: func(l map[string]hotlimit.Policy) (admission.Backend, error) {
			b, err := newLocal(l, hotlimit.WithSweepInterval(0))
			return bindingOnly{b}, err
		},
	})
	if got := hs.do("/", token).Header().Get("RateLimit"); got != `"l";r=3` {
		t.Errorf("RateLimit = %q, want the binding layer's item only", got)
	}
}
