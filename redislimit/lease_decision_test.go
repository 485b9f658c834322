package redislimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestDecideFixedWindow: Decide's Decision within its documented bounds,
// on a fixed window where they are exact: Remaining is what the lease
// holds after the decision, ResetAfter the time to the window's end, and
// a refusal's RetryAfter Redis's (to the window's end), counted down when
// answered from memory. A larger cost than the refused one is asked of
// Redis again.
func TestDecideFixedWindow(t *testing.T) {
	addr := redistest.Addr(t)
	const W = int64(time.Minute / time.Microsecond)
	clk := hotlimit.NewManualClock()
	c := redistest.Client(t, addr)
	var sent redistest.Counter
	c.AddHook(&sent)
	l := leased(t, c, redistest.Prefix(t), hotlimit.FixedWindow{Limit: 10, Window: time.Minute}, clk, WithLeases(4, 0), WithTimeout(5*time.Second))
	toEnd := func() time.Duration { // the time to the window's end, on the test's instants
		return time.Duration(W-(epoch+int64(clk.Now()/time.Microsecond))%W) * time.Microsecond
	}
	ctx := context.Background()
	admitted := 0
	for i := 0; ; i++ {
		clk.Advance(time.Millisecond)
		// Remaining is what the lease holds right after the decision: one
		// less than before when the lease paid, else what the take left
		// (read before a background refill may add to it).
		h0 := l.held("k")
		d, err := l.AllowN(ctx, "k", 1)
		want := h0 - 1
		if h0 < 1 {
			want = l.held("k")
		}
		l.leases.bg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if d.Limit != 10 {
			t.Fatalf("request %d: Limit %d, want 10", i, d.Limit)
		}
		if !d.Allowed {
			if admitted != 10 {
				t.Fatalf("refused after %d admissions, want 10", admitted)
			}
			if d.RetryAfter != toEnd() || d.Remaining != want || d.ResetAfter != toEnd() {
				t.Fatalf("refusal: %+v; want RetryAfter = ResetAfter = %v (the window's end), Remaining %d (the lease)", d, toEnd(), want)
			}
			break
		}
		admitted++
		if d.RetryAfter != 0 || d.Remaining != want || d.ResetAfter != toEnd() {
			t.Fatalf("admission %d: %+v; want Remaining %d (what the lease holds), ResetAfter %v", i, d, want, toEnd())
		}
	}
	// The same refusal again comes from memory, counted down.
	clk.Advance(time.Second)
	before := sent.N()
	if d, err := l.AllowN(ctx, "k", 1); err != nil || d.Allowed || d.RetryAfter != toEnd() || sent.N() != before {
		t.Fatalf("the refused cost again: %+v, %v, %d commands; want the remembered refusal, RetryAfter %v", d, err, sent.N()-before, toEnd())
	}
	// A larger cost is not the same request: Redis answers it.
	if d, err := l.AllowN(ctx, "k", 2); err != nil || d.Allowed || d.RetryAfter != toEnd() || sent.N() != before+1 {
		t.Fatalf("cost 2 after a refusal of cost 1: %+v, %v, %d commands; want Redis's refusal", d, err, sent.N()-before)
	}
	if d, _ := l.AllowN(ctx, "k", 11); d.Allowed || d.RetryAfter != hotlimit.Never {
		t.Fatalf("cost above the limit: %+v; want RetryAfter Never", d)
	}
	if d, _ := l.AllowN(ctx, "k", 0); !d.Allowed || d.Remaining != l.held("k") {
		t.Fatalf("cost 0: %+v; want admitted, Remaining the lease's", d)
	}
}

// TestLeaseBehindMiddleware: two instances, each an httplimit middleware
// whose backend decides from leases, share one budget per client through
// a real Redis: the fleet admits at most the limit and at least the limit
// less what the two leases may hold, every response carries its own
// decision's rate-limit fields, a refusal its Retry-After, and the calls
// go through the backend's options (here the hooks).
func TestLeaseBehindMiddleware(t *testing.T) {
	const limit, maxLease = 30, 5
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	var calls atomic.Int64
	hooks := Hooks{Call: func(string, time.Duration, error) { calls.Add(1) }}
	var handlers []http.Handler
	var backends []admission.Backend
	for range 2 {
		c := redistest.Client(t, addr)
		factory := BackendFactory(c, WithPrefix(prefix), WithTimeout(5*time.Second), WithHooks(hooks), WithLeases(maxLease, 0))
		m, err := httplimit.New(httplimit.Config{
			Limits:       map[string]hotlimit.Policy{"api": hotlimit.FixedWindow{Limit: limit, Window: time.Hour}},
			Groups:       []httplimit.Group{{Name: "g", Limit: "api"}},
			DefaultGroup: "g",
			Key:          httplimit.TokenKey("Authorization"),
			Backend: func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
				b, err := factory(limits)
				if b != nil {
					backends = append(backends, b)
				}
				return b, err
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		handlers = append(handlers, m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	}
	t.Cleanup(func() {
		for _, b := range backends {
			b.Close()
		}
	})
	var mu sync.Mutex
	admitted, refused := 0, 0
	var wg sync.WaitGroup
	for i, h := range handlers {
		wg.Go(func() {
			for j := range 40 {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("Authorization", "Bearer client-0123456789abcdef")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				mu.Lock()
				switch w.Code {
				case http.StatusOK:
					admitted++
				case http.StatusTooManyRequests:
					refused++
					if s, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || s <= 0 || s > 3600 {
						t.Errorf("instance %d, request %d: Retry-After %q; want 1..3600 s (the window's end)", i, j, w.Header().Get("Retry-After"))
					}
				default:
					t.Errorf("instance %d, request %d: status %d", i, j, w.Code)
				}
				if w.Header().Get("RateLimit") == "" && w.Header().Get("X-RateLimit-Limit") == "" {
					t.Errorf("instance %d, request %d: no rate-limit fields: %v", i, j, w.Header())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if admitted > limit || admitted < limit-2*maxLease || admitted+refused != 80 {
		t.Fatalf("%d admitted, %d refused of 80; want between %d and %d admitted (the limit less what two leases may hold)", admitted, refused, limit-2*maxLease, limit)
	}
	if n := calls.Load(); n == 0 || n >= 80 {
		t.Fatalf("the Call hook saw %d calls for 80 requests; want some, and fewer than one per request (leases)", n)
	}
}

// TestModeMixed: a layered call that mixes a limiter in lease mode with
// one deciding on Redis is refused as misconfigured, before deciding.
func TestModeMixed(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	var seen atomic.Int64
	hooks := WithHooks(Hooks{Misconfigured: func(string, hotlimit.Decision, error) { seen.Add(1) }})
	p := hotlimit.FixedWindow{Limit: 10, Window: time.Hour}
	leased, err := New(c, "leased", p, WithPrefix(redistest.Prefix(t)), hooks, WithLeases(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer leased.Close()
	plain, err := New(c, "plain", p, WithPrefix(redistest.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	d, err := AllowLayers(context.Background(), Layer{Limiter: leased, Key: "k", Cost: 1}, Layer{Limiter: plain, Key: "k", Cost: 1})
	if !errors.Is(err, ErrMixedLayers) || d.Allowed || seen.Load() != 1 {
		t.Fatalf("mixed layers: %+v, %v, %d hook calls; want a refusal with ErrMixedLayers, seen by Misconfigured", d, err, seen.Load())
	}
	if d, err := leased.AllowN(context.Background(), "k", 3); err != nil || !d.Allowed || d.Limit != 10 {
		t.Fatalf("lease mode alone: %+v, %v", d, err)
	}
	for _, p := range []hotlimit.Policy{hotlimit.SlidingLog{Limit: 5, Window: time.Second}, hotlimit.SlidingWindow{Limit: 5, Window: time.Second},
		hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(5), Capacity: 5}} {
		if _, err := New(c, "other", p, WithLeases(0, 0)); err == nil || !strings.Contains(err.Error(), "WithLeases") {
			t.Fatalf("lease mode on %T: %v; want an error naming WithLeases", p, err)
		}
	}
	for _, o := range []Option{WithLeases(-1, 0), WithLeases(0, -time.Second)} {
		if _, err := New(c, "bad", p, o); err == nil || !strings.Contains(err.Error(), "WithLeases") {
			t.Fatalf("a negative WithLeases argument: %v; want an error naming WithLeases", err)
		}
	}
}

// TestBackendAllOrNothing: a request refused by its second layer gives
// the first layer's units back to this instance's lease: the next request
// that fits both is admitted from it.
func TestBackendAllOrNothing(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	b, err := NewBackend(c, map[string]hotlimit.Policy{
		"wide":   hotlimit.FixedWindow{Limit: 100, Window: time.Hour},
		"narrow": hotlimit.FixedWindow{Limit: 2, Window: time.Hour},
	}, WithPrefix(redistest.Prefix(t)), WithLeases(10, 0), WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	ls := []admission.Layer{{Limit: "wide", Key: "k", Cost: 1}, {Limit: "narrow", Key: "k", Cost: 2}}
	d, i, err := b.AllowStates(ctx, ls, nil)
	if err != nil || !d.Allowed || i != 1 || d.Remaining != 0 {
		t.Fatalf("first request: %+v, binding %d, %v; want admitted, narrow binding with 0 left", d, i, err)
	}
	// Spent units (debited, not held) count the admissions the lease
	// paid for; a refill in the background changes what it holds, not them.
	wide := b.limiters["wide"]
	wide.leases.bg.Wait()
	e := wide.leases.lookup("k")
	spent := e.spent()
	states := make([]hotlimit.LayerState, 2)
	d, i, err = b.AllowStates(ctx, ls, states)
	if err != nil || d.Allowed || i != 1 || d.RetryAfter <= 0 {
		t.Fatalf("second request: %+v, binding %d, %v; want refused by narrow", d, i, err)
	}
	wide.leases.bg.Wait()
	if got := e.spent(); got != spent {
		t.Fatalf("wide spent %d after the refusal, %d before: its unit was not given back", got, spent)
	}
	if states[0].Decision.Remaining < 1 || states[1].Decision.Remaining != 0 || states[0].Next != hotlimit.Never {
		t.Fatalf("states %+v; want wide's lease (with the unit given back) with Window Never, narrow 0", states)
	}
}

// TestDecideTokenBucket: on a token bucket alone in the fleet, Decide's
// ResetAfter is exact: the shared TAT in Redis less the instant, as the
// last take left it and counted down since (another instance's takes
// would only push the TAT later: a lower bound). Remaining is the lease's
// units after the decision, and a refusal's RetryAfter Redis's wait for
// that cost.
func TestDecideTokenBucket(t *testing.T) {
	addr := redistest.Addr(t)
	clk := hotlimit.NewManualClock()
	c := redistest.Client(t, addr)
	const T = int64(100_000) // µs: 10 per second
	l := leased(t, c, redistest.Prefix(t), hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 20}, clk, WithLeases(5, 0), WithTimeout(5*time.Second))
	ctx := context.Background()
	tat := func() int64 { // the shared state, µs (0: none yet)
		v, err := c.Get(ctx, l.RedisKey("k")).Int64()
		if err == redis.Nil {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	refused := false
	for i := range 60 {
		clk.Advance(7 * time.Millisecond)
		// Paid from the lease, the Decision reflects the last take (tat0);
		// otherwise the take it made itself (read before any refill).
		h0, tat0 := l.held("k"), tat()
		d, err := l.AllowN(ctx, "k", 2)
		want, last := h0-2, tat0
		if h0 < 2 {
			want, last = l.held("k"), tat()
		}
		l.leases.bg.Wait()
		if err != nil || d.Limit != 20 {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
		if w := time.Duration(max(0, last-l.testNow())) * time.Microsecond; d.ResetAfter != w {
			t.Fatalf("request %d: ResetAfter %v, want %v (TAT − now)", i, d.ResetAfter, w)
		}
		if d.Remaining != want {
			t.Fatalf("request %d: Remaining %d, want %d (what the lease holds)", i, d.Remaining, want)
		}
		if !d.Allowed {
			refused = true
			// Redis's wait for 2 units: the TAT's excess over the burst.
			if w := time.Duration(last+2*T-20*T-l.testNow()) * time.Microsecond; d.RetryAfter != w {
				t.Fatalf("request %d refused: RetryAfter %v, want %v", i, d.RetryAfter, w)
			}
		}
	}
	if !refused {
		t.Fatal("never refused: the test did not reach the bucket's limit")
	}
}

// TestModeAllOrNothing: AllowLayers over limiters in lease
// mode gives the units of the layers admitted before a refusal back to
// their leases, and reports each layer's state.
func TestModeAllOrNothing(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	prefix := redistest.Prefix(t)
	wide, err := New(c, "wide", hotlimit.FixedWindow{Limit: 100, Window: time.Hour}, WithPrefix(prefix), WithTimeout(5*time.Second), WithLeases(10, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer wide.Close()
	narrow, err := New(c, "narrow", hotlimit.FixedWindow{Limit: 2, Window: time.Hour}, WithPrefix(prefix), WithTimeout(5*time.Second), WithLeases(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer narrow.Close()
	ctx := context.Background()
	ls := []Layer{{Limiter: wide, Key: "k", Cost: 1}, {Limiter: narrow, Key: "k", Cost: 2}}
	d, i, err := AllowLayersState(ctx, nil, ls...)
	if err != nil || !d.Allowed || i != 1 || d.Remaining != 0 {
		t.Fatalf("first request: %+v, binding %d, %v; want admitted, narrow binding with 0 left", d, i, err)
	}
	wide.leases.bg.Wait()
	e := wide.leases.lookup("k")
	spent := e.spent()
	d, i, err = AllowLayersState(ctx, nil, ls...)
	if err != nil || d.Allowed || i != 1 || d.RetryAfter <= 0 {
		t.Fatalf("second request: %+v, binding %d, %v; want refused by narrow", d, i, err)
	}
	wide.leases.bg.Wait()
	if got := e.spent(); got != spent {
		t.Fatalf("wide spent %d after the refusal, %d before: its unit was not given back", got, spent)
	}
}

// TestModeSweep: redislimit's SweepLeases reaches the lease mode's Sweep:
// a key with no spending since the previous sweep is forgotten.
func TestModeSweep(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	rb, err := NewBackend(c, map[string]hotlimit.Policy{"a": hotlimit.FixedWindow{Limit: 100, Window: time.Hour}},
		WithPrefix(redistest.Prefix(t)), WithTimeout(5*time.Second), WithLeases(10, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	ctx := context.Background()
	if d, err := allow(ctx, rb, []admission.Layer{{Limit: "a", Key: "k", Cost: 1}}); err != nil || !d.Allowed {
		t.Fatalf("%+v, %v", d, err)
	}
	l := rb.limiters["a"]
	l.leases.bg.Wait()
	if err := rb.SweepLeases(ctx); err != nil || l.leases.lookup("k") == nil {
		t.Fatalf("first sweep after spending: %v; the key must stay", err)
	}
	if err := rb.SweepLeases(ctx); err != nil || l.leases.lookup("k") != nil {
		t.Fatalf("second sweep, nothing spent since: %v; the key must be forgotten", err)
	}
}
