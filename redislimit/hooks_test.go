package redislimit

import (
	"context"
	"errors"
	"github.com/hotlimit/hotlimit/admission"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// recorder collects what the hooks report.
type recorder struct {
	mu       sync.Mutex
	calls    []string // node
	callErrs []error
	failures []error
	states   []string
	local    int
	config   []error // Misconfigured
}

func (r *recorder) hooks() Hooks {
	return Hooks{
		Call: func(node string, took time.Duration, err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.calls = append(r.calls, node)
			r.callErrs = append(r.callErrs, err)
		},
		Failure: func(limiter string, d hotlimit.Decision, err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.failures = append(r.failures, err)
		},
		Breaker: func(node string, from, to string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.states = append(r.states, node+" "+from+"->"+to)
		},
		Misconfigured: func(limiter string, d hotlimit.Decision, err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.config = append(r.config, err)
		},
		LocalDenial: func(string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.local++
		},
	}
}

// TestHooksSeeEveryFailure: with FailOpen, callers see admissions while
// Redis is unreachable; the hooks see every call to the node, every
// failure-policy decision with its error (also when a Backend hides the
// error from the middleware), and the circuit's state changes.
//
// The client is one whose every call fails as a refused connection would
// (deadScripter, a Scripter that names no node: its circuit is ""), so
// that the test runs in a synctest bubble, whose clock passes the
// breaker's cool-down (gobreaker reads time.Now) without waiting.
func TestHooksSeeEveryFailure(t *testing.T) {
	synctest.Test(t, testHooksSeeEveryFailure)
}

// deadScripter is a redis.Scripter whose every call fails with a network
// error, as a server that refuses connections makes them fail.
type deadScripter struct{ _ byte }

var errRefused = &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection refused")}

func (*deadScripter) cmd(ctx context.Context) *redis.Cmd {
	c := redis.NewCmd(ctx)
	c.SetErr(errRefused)
	return c
}
func (d *deadScripter) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return d.cmd(ctx)
}
func (d *deadScripter) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return d.cmd(ctx)
}
func (d *deadScripter) EvalRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return d.cmd(ctx)
}
func (d *deadScripter) EvalShaRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return d.cmd(ctx)
}
func (*deadScripter) ScriptExists(ctx context.Context, _ ...string) *redis.BoolSliceCmd {
	c := redis.NewBoolSliceCmd(ctx)
	c.SetErr(errRefused)
	return c
}
func (*deadScripter) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	c := redis.NewStringCmd(ctx)
	c.SetErr(errRefused)
	return c
}

func testHooksSeeEveryFailure(t *testing.T) {
	dead := "" // the node of a client that names none
	c := &deadScripter{}
	var rec recorder
	b := NewBreaker(2, time.Second)
	ctx := context.Background()
	l := must(New(c, "open", slowBucket, WithFailOpen(), WithBreaker(b), WithHooks(rec.hooks())))
	for i := range 3 {
		if d, err := l.Allow(ctx, "k"); !d.Allowed || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("call %d: %+v, %v", i, d, err)
		}
	}
	time.Sleep(time.Second + time.Nanosecond) // the bubble's clock: the cool-down passes
	l.Allow(ctx, "k")                         // the probe, which fails
	if len(rec.failures) != 4 || !errors.Is(rec.failures[2], ErrCircuitOpen) {
		t.Fatalf("Failure saw %v; want 4 errors, the third ErrCircuitOpen", rec.failures)
	}
	if len(rec.calls) != 3 || rec.calls[0] != dead || rec.callErrs[0] == nil {
		t.Fatalf("Call saw %v %v; want 3 failed calls to %s (the open circuit sent nothing)", rec.calls, rec.callErrs, dead)
	}
	want := []string{dead + " closed->open", dead + " open->half-open", dead + " half-open->open"}
	if len(rec.states) != len(want) || rec.states[0] != want[0] || rec.states[1] != want[1] || rec.states[2] != want[2] {
		t.Fatalf("Breaker saw %v, want %v", rec.states, want)
	}

	// A backend with a failure policy answers the middleware without an
	// error; the hook still sees it.
	var brec recorder
	be := must(NewBackend(c, map[string]hotlimit.Policy{"a": slowBucket}, WithFailOpen(), WithHooks(brec.hooks())))
	if d, err := allow(ctx, be, []admission.Layer{{Limit: "a", Key: "k", Cost: 1}}); err != nil || !d.Allowed {
		t.Fatalf("backend: %+v, %v", d, err)
	}
	if len(brec.failures) != 1 || !errors.Is(brec.failures[0], ErrUnavailable) {
		t.Fatalf("the backend's failure was not reported: %v", brec.failures)
	}
}

// TestHooksTimeoutAndLocal: a call that times out is reported with an
// error IsTimeout recognises, and a request the two-tier cache answers is
// reported to LocalDenial.
func TestHooksTimeoutAndLocal(t *testing.T) {
	addr := redistest.Addr(t)
	var rec recorder
	ctx := context.Background()
	l := must(New(redistest.Client(t, addr), "hl", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1},
		WithPrefix(redistest.Prefix(t)), WithLocalDenials(10), WithHooks(rec.hooks())))
	must(l.Allow(ctx, "k"))
	must(l.Allow(ctx, "k"))
	must(l.Allow(ctx, "k"))
	if rec.local != 1 || len(rec.calls) != 2 || rec.calls[0] != addr || rec.callErrs[0] != nil {
		t.Fatalf("LocalDenial %d, Call %v %v; want 1 local denial and 2 calls to %s", rec.local, rec.calls, rec.callErrs, addr)
	}

	proxy := newSlowProxy(t, addr, time.Second)
	slow := redistest.Client(t, proxy.addr())
	pctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	if err := slow.Ping(pctx).Err(); err != nil { // a connection, established at leisure
		t.Fatal(err)
	}
	var srec recorder
	sl := must(New(slow, "hs", slowBucket, WithPrefix(redistest.Prefix(t)), WithTimeout(50*time.Millisecond), WithHooks(srec.hooks())))
	if _, err := sl.Allow(ctx, "k"); !isTimeout(err) {
		t.Fatalf("err %v; want a timeout", err)
	}
	if len(srec.callErrs) != 1 || !isTimeout(srec.callErrs[0]) || len(srec.failures) != 1 {
		t.Fatalf("Call saw %v, Failure %v; want one timeout each", srec.callErrs, srec.failures)
	}
}

// TestHooksMayUseTheBreaker: the Breaker hook runs after the circuit's
// lock is released, so it may ask the breaker about its state.
func TestHooksMayUseTheBreaker(t *testing.T) {
	c := redistest.Client(t, "127.0.0.1:1") // nothing listens there
	b := NewBreaker(1, time.Hour)
	var seen []bool
	h := Hooks{Breaker: func(node string, from, to string) { seen = append(seen, b.open()) }}
	l := must(New(c, "hb", slowBucket, WithBreaker(b), WithHooks(h)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Allow(context.Background(), "k")
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return: the hook deadlocked on the breaker")
	}
	if len(seen) != 1 || !seen[0] {
		t.Fatalf("the hook saw Open() = %v; want one call seeing the open circuit", seen)
	}
}

// TestHooksMisconfigured: a layered call refused as misconfigured (here
// its limiters use different clients) reaches the first layer's hooks
// with the error it returns. TestClusterCrossSlot checks ErrCrossSlot.
func TestHooksMisconfigured(t *testing.T) {
	var rec recorder
	p := hotlimit.FixedWindow{Limit: 5, Window: time.Hour}
	a := must(New(redistest.Client(t, "127.0.0.1:1"), "a", p, WithHooks(rec.hooks())))
	b := must(New(redistest.Client(t, "127.0.0.1:1"), "b", p))
	_, err := AllowLayers(context.Background(), Layer{a, "k", 1}, Layer{b, "k", 1})
	if !errors.Is(err, ErrMixedLayers) || len(rec.config) != 1 || rec.config[0] != err || len(rec.failures) != 0 {
		t.Fatalf("mixed clients: %v; hooks saw %v (failures %v); want the returned error in Misconfigured", err, rec.config, rec.failures)
	}
}
