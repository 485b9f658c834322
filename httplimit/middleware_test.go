package httplimit

import (
	"context"
	"errors"
	"fmt"
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestGlobalAllOrNothing: a request denied by the global layer consumes
// nothing in its group's layer, and the headers name the binding layer.
func TestGlobalAllOrNothing(t *testing.T) {
	hs := newHarness(t, Config{
		Limits: map[string]hotlimit.Policy{
			"a":   hotlimit.TokenBucket{Rate: hotlimit.PerMinute(10), Burst: 10},
			"b":   hotlimit.TokenBucket{Rate: hotlimit.PerMinute(10), Burst: 10},
			"all": hotlimit.FixedWindow{Limit: 3, Window: time.Minute},
		},
		Groups:       []Group{{Name: "a", Patterns: []string{"/a"}, Limit: "a"}, {Name: "b", Patterns: []string{"/b"}, Limit: "b"}},
		DefaultGroup: "a",
		Global:       "all",
		Key:          TokenKey("Authorization"),
	})
	for i := range 3 {
		w := hs.do("/b", token)
		if w.Code != http.StatusOK {
			t.Fatalf("/b: %d", w.Code)
		}
		// One item per limit, each with its own r and t: b's bucket (10
		// per minute) has its next unit back 6 s after this instant, the
		// global window (3 per minute) ends at 1020 s, 20 s from now.
		if got, want := w.Header().Get("RateLimit"), fmt.Sprintf(`"b";r=%d;t=6, "all";r=%d;t=20`, 9-i, 2-i); got != want {
			t.Fatalf("/b #%d: RateLimit = %q, want %q", i, got, want)
		}
	}
	w := hs.do("/a", token)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("/a: %d, want 429 from the global layer", w.Code)
	}
	// a's layer is full (no t: nothing to come back), the global one
	// is spent.
	if got := w.Header().Get("RateLimit"); got != `"a";r=10, "all";r=0;t=20` {
		t.Errorf("RateLimit = %q", got)
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"a";q=10;w=60, "all";q=3;w=60` {
		t.Errorf("RateLimit-Policy = %q", got)
	}
	key := hs.m.LayerKey(tokenIdentity(t, token), "a")
	if d := hs.local(t).Classes().Class("a").AllowN(key, 0); d.Remaining != 10 {
		t.Fatalf("group a Remaining = %d after a global denial, want 10 (nothing consumed)", d.Remaining)
	}
	// Another token has its own global quota.
	if w := hs.do("/a", "other-token"); w.Code != http.StatusOK {
		t.Fatalf("other token: %d", w.Code)
	}
}

func TestDryRun(t *testing.T) {
	var outcomes []admission.Outcome
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 2, Window: time.Minute}},
		Groups:       []Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          TokenKey("Authorization"),
		DryRun:       true,
		Hook:         func(e admission.Event) { outcomes = append(outcomes, e.Outcome) },
	})
	for range 4 {
		w := hs.do("/", token)
		if w.Code != http.StatusOK || w.Header().Get("RateLimit") != "" || w.Header().Get("Retry-After") != "" {
			t.Fatalf("dry run: %d %v", w.Code, w.Header())
		}
	}
	if hs.calls != 4 {
		t.Fatalf("handler called %d times, want 4", hs.calls)
	}
	want := []admission.Outcome{admission.OutcomeAllowed, admission.OutcomeAllowed, admission.OutcomeDryRunDenied, admission.OutcomeDryRunDenied}
	for i := range want {
		if outcomes[i] != want[i] {
			t.Fatalf("outcomes = %v, want %v", outcomes, want)
		}
	}
	if c := hs.m.Counts()[0].Counts; c[admission.OutcomeAllowed] != 2 || c[admission.OutcomeDryRunDenied] != 2 || c[admission.OutcomeDenied] != 0 {
		t.Fatalf("counts = %v", c)
	}
}

func TestHook(t *testing.T) {
	var evs []admission.Event
	hs := newHarness(t, Config{
		Limits:        map[string]hotlimit.Policy{"l": hotlimit.SlidingWindow{Limit: 1, Window: time.Minute}},
		Groups:        []Group{{Name: "g", Limit: "l"}},
		DefaultGroup:  "g",
		Key:           TokenKey("Authorization"),
		PolicyVersion: "2026-11-29.1",
		Hook:          func(e admission.Event) { evs = append(evs, e) },
	})
	hs.do("/", token)
	hs.do("/", token)
	hs.do("/", "someone-else")
	if len(evs) != 3 {
		t.Fatalf("%d events", len(evs))
	}
	e := evs[0]
	if e.Group != "g" || e.GroupLimit != "l" || e.GroupAlgorithm != "SlidingWindow" || e.Algorithm != "SlidingWindow" || e.Limit != "l" || e.PolicyVersion != "2026-11-29.1" ||
		e.Outcome != admission.OutcomeAllowed || e.Decision.Remaining != 0 || e.Context == nil || e.Method != "GET" || e.Transport != "http" || e.IdentityHash == 0 {
		t.Errorf("event 0 = %+v", e)
	}
	if evs[1].Outcome != admission.OutcomeDenied || evs[1].Decision.Allowed || evs[1].IdentityHash != e.IdentityHash {
		t.Errorf("event 1 = %+v", evs[1])
	}
	if evs[2].Outcome != admission.OutcomeAllowed || evs[2].IdentityHash == e.IdentityHash {
		t.Errorf("event 2 = %+v", evs[2])
	}
}

func TestBackendFailure(t *testing.T) {
	down := errors.New("store down")
	failing := func(map[string]hotlimit.Policy) (admission.Backend, error) {
		return backendFunc(func(context.Context, []admission.Layer) (hotlimit.Decision, error) { return hotlimit.Decision{}, down }), nil
	}
	for _, failOpen := range []bool{false, true} {
		var ev admission.Event
		hs := newHarness(t, Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 2, Window: time.Minute}},
			Groups:       []Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          TokenKey("Authorization"),
			Backend:      failing,
			FailOpen:     failOpen,
			Hook:         func(e admission.Event) { ev = e },
		})
		w := hs.do("/", token)
		if !errors.Is(ev.Err, down) {
			t.Errorf("FailOpen %v: hook Err = %v", failOpen, ev.Err)
		}
		if w.Header().Get("RateLimit") != "" || w.Header().Get("Retry-After") != "" {
			t.Errorf("FailOpen %v: rate-limit headers on a backend failure: %v", failOpen, w.Header())
		}
		if !failOpen {
			if w.Code != http.StatusServiceUnavailable || hs.calls != 0 || ev.Outcome != admission.OutcomeErrorDenied ||
				strings.TrimSpace(w.Body.String()) != `{"error":"rate_limiter_unavailable"}` {
				t.Errorf("fail-closed: %d calls=%d outcome=%v body=%s", w.Code, hs.calls, ev.Outcome, w.Body)
			}
		} else if w.Code != http.StatusOK || hs.calls != 1 || ev.Outcome != admission.OutcomeErrorAllowed {
			t.Errorf("fail-open: %d calls=%d outcome=%v", w.Code, hs.calls, ev.Outcome)
		}
	}
}

func TestConcurrentExactCounts(t *testing.T) {
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 50, Window: time.Hour}},
		Groups:       []Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          TokenKey("Authorization"),
	})
	h := hs.m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("Authorization", "Bearer "+token)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				mu.Lock()
				codes[w.Code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if codes[200] != 50 || codes[429] != 110 {
		t.Fatalf("codes = %v, want 50 × 200 and 110 × 429", codes)
	}
	if c := hs.m.Counts()[0].Counts; c[admission.OutcomeAllowed] != 50 || c[admission.OutcomeDenied] != 110 {
		t.Fatalf("counts = %v", c)
	}
}

// TestLeakyBucketDelay: an admitted request with a Delay waits it out
// before the handler runs; if the client goes away meanwhile, the handler
// is not called.
func TestLeakyBucketDelay(t *testing.T) {
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"lb": hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(4), Capacity: 2}},
		Groups:       []Group{{Name: "g", Limit: "lb"}},
		DefaultGroup: "g",
		Key:          TokenKey("Authorization"),
	})
	for range 3 {
		if w := hs.do("/", token); w.Code != http.StatusOK {
			t.Fatalf("status %d", w.Code)
		}
	}
	if len(hs.waits) != 2 || hs.waits[0] != 250*time.Millisecond || hs.waits[1] != 500*time.Millisecond || hs.calls != 3 {
		t.Fatalf("waits = %v, calls = %d; want [250ms 500ms], 3", hs.waits, hs.calls)
	}
	hs.clock.Advance(time.Second)
	hs.do("/", token) // no delay
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
	r.Header.Set("Authorization", "Bearer "+token)
	hs.h.ServeHTTP(httptest.NewRecorder(), r)
	if hs.calls != 4 || len(hs.waits) != 3 {
		t.Fatalf("calls = %d, waits = %v: a request whose client left must not reach the handler", hs.calls, hs.waits)
	}
}

// TestDryRunNeverBlocks: a dark-launched limit changes nothing for the
// client, whatever happens: no key (without FallbackToIP), a backend that
// fails (failing closed, the default), or a LeakyBucket that would shape the request
// with a Delay. The handler is called at once every time, and the outcome
// still tells what enforcement would have done.
func TestDryRunNeverBlocks(t *testing.T) {
	var ev admission.Event
	base := func() Config {
		return Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Minute}},
			Groups:       []Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          TokenKey("Authorization"),
			DryRun:       true,
			Hook:         func(e admission.Event) { ev = e },
		}
	}

	hs := newHarness(t, base())
	if w := hs.do("/", ""); w.Code != http.StatusOK || hs.calls != 1 || w.Header().Get("Retry-After") != "" {
		t.Errorf("dry run, no key: %d, calls=%d; want the handler called", w.Code, hs.calls)
	}
	if ev.Outcome != admission.OutcomeDryRunDenied || !errors.Is(ev.Err, ErrNoKey) {
		t.Errorf("dry run, no key: event %+v, want admission.OutcomeDryRunDenied with ErrNoKey", ev)
	}

	cfg := base()
	down := errors.New("store down")
	cfg.Backend = func(map[string]hotlimit.Policy) (admission.Backend, error) {
		return backendFunc(func(context.Context, []admission.Layer) (hotlimit.Decision, error) { return hotlimit.Decision{}, down }), nil
	}
	hs = newHarness(t, cfg) // failing closed, the default
	if w := hs.do("/", token); w.Code != http.StatusOK || hs.calls != 1 {
		t.Errorf("dry run, backend down: %d, calls=%d; want the handler called", w.Code, hs.calls)
	}
	if ev.Outcome != admission.OutcomeErrorAllowed || !errors.Is(ev.Err, down) {
		t.Errorf("dry run, backend down: event %+v, want ErrorAllowed", ev)
	}

	cfg = base()
	cfg.Limits = map[string]hotlimit.Policy{"l": hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(1), Capacity: 5}}
	hs = newHarness(t, cfg)
	for range 3 {
		if w := hs.do("/", token); w.Code != http.StatusOK {
			t.Fatalf("dry run, leaky bucket: %d", w.Code)
		}
	}
	if hs.calls != 3 || len(hs.waits) != 0 {
		t.Errorf("dry run, leaky bucket: calls=%d waits=%v; want 3 calls and no shaping delay", hs.calls, hs.waits)
	}
	if ev.Outcome != admission.OutcomeAllowed || ev.Decision.Delay != 2*time.Second {
		t.Errorf("dry run, leaky bucket: event %+v, want admission.OutcomeAllowed with the Delay it would have had", ev)
	}
}
