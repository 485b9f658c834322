package redislimit

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The tests here freeze a private server (redistest.Server.Freeze) with
// decisions in flight and others queued behind them, and decide when it
// answers again, so that what they check never depends on how fast a
// loaded machine runs them: each waits for a state of the batcher
// (queued, in flight), never for a time.

// endable is a context whose deadline passes when the test calls end: Err
// is then context.DeadlineExceeded, as for a deadline that passed, without
// a timer that a loaded machine could fire early or late.
type endable struct {
	context.Context
	dl   time.Time
	done chan struct{}
	once sync.Once
}

func newEndable(parent context.Context) *endable {
	return &endable{Context: parent, dl: time.Now().Add(time.Hour), done: make(chan struct{})}
}

func (e *endable) Deadline() (time.Time, bool) { return e.dl, true }
func (e *endable) Done() <-chan struct{}       { return e.done }
func (e *endable) end()                        { e.once.Do(func() { close(e.done) }) }

func (e *endable) Err() error {
	select {
	case <-e.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// batcherState waits until b has inFlight batches or lone calls in flight
// and queued calls queued.
func batcherState(t *testing.T, b *batcher, inFlight, queued int) {
	t.Helper()
	redistest.WaitFor(t, "the batcher's calls", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.inFlight == inFlight && len(b.queue) == queued
	})
}

// frozenBatcher starts a private server, makes one decision on a client
// of its own (loading the script), freezes the server, and puts two
// decisions of l (the limiter newL makes on that client) in flight, which
// take the batcher's turns: what is decided next queues. It returns the
// server, l, the batcher and the in-flight decisions' errors.
func frozenBatcher(t *testing.T, newL func(c redis.Scripter) *Limiter) (*redistest.Server, *Limiter, *batcher, chan error) {
	t.Helper()
	srv := redistest.StartServer(t, 0)
	c := redistest.Client(t, srv.Addr())
	l := newL(c)
	ctx := context.Background()
	if _, err := l.Allow(ctx, "warm"); err != nil {
		t.Fatal(err)
	}
	b := routerFor(c).batch
	srv.Freeze()
	inFlight := make(chan error, maxBatchesInFlight)
	for range maxBatchesInFlight {
		go func() {
			_, err := l.Allow(ctx, "in-flight")
			inFlight <- err
		}()
	}
	batcherState(t, b, maxBatchesInFlight, 0)
	return srv, l, b, inFlight
}

// TestBatchQueuedDeadlineIsNotAFailure: callers queued behind decisions
// in flight, whose deadlines pass before anything of theirs was sent,
// count as no failure of the node (doc.go, Breaker): 12 of them leave a
// circuit of threshold 5 closed, and once the frozen server answers again
// a caller with time to spare is decided by Redis, not refused with
// ErrCircuitOpen.
func TestBatchQueuedDeadlineIsNotAFailure(t *testing.T) {
	srv, l, b, inFlight := frozenBatcher(t, func(c redis.Scripter) *Limiter {
		return must(New(c, "qd", slowBucket, WithTimeout(time.Minute), WithBreaker(NewBreaker(defaultFailures, time.Hour))))
	})
	const queued = 12
	errs := make(chan error, queued)
	var ctxs []*endable
	for range queued {
		e := newEndable(context.Background())
		ctxs = append(ctxs, e)
		go func() {
			_, err := l.Allow(e, "queued")
			errs <- err
		}()
	}
	batcherState(t, b, maxBatchesInFlight, queued)
	for _, e := range ctxs {
		e.end()
	}
	for range queued {
		if err := <-errs; !errors.Is(err, ErrUnavailable) || !isTimeout(err) {
			t.Fatalf("a queued call whose deadline passed: %v; want ErrUnavailable and a timeout", err)
		}
	}
	if st := l.breaker.state(srv.Addr()); st != "closed" {
		t.Fatalf("after %d queued calls left unsent: circuit %v, want closed", queued, st)
	}
	srv.Thaw()
	for range maxBatchesInFlight {
		if err := <-inFlight; err != nil {
			t.Fatalf("a decision in flight while the server was frozen: %v", err)
		}
	}
	if d, err := l.Allow(context.Background(), "later"); err != nil || !d.Allowed {
		t.Fatalf("a caller with time to spare, after the server answered again: %+v, %v; want Redis's admission", d, err)
	}
}

// goid returns the calling goroutine's number, from its stack trace's
// first line ("goroutine 7 [running]:").
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// callerHooks is one caller's view of its limiter's Call hook: the
// goroutine each report ran on, and its error.
type callerHooks struct {
	mu   sync.Mutex
	gids []string
	errs []error
}

func (h *callerHooks) hooks() Hooks {
	return Hooks{Call: func(node string, took time.Duration, err error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.gids, h.errs = append(h.gids, goid()), append(h.errs, err)
	}}
}

// seen returns what the hook saw so far.
func (h *callerHooks) seen() ([]string, []error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.gids), slices.Clone(h.errs)
}

// TestBatchHooksOnTheCaller: every caller of a batch sees its call in its
// own limiter's Hooks.Call synchronously, on its own goroutine, with the
// error it got (hooks.go): nil for a decision Redis made, the decision's
// own script error for a key that holds a hash, and its context's error
// for a caller that left the batch in flight; nothing reaches a caller's
// hooks after its call returned.
func TestBatchHooksOnTheCaller(t *testing.T) {
	srv := redistest.StartServer(t, 0)
	c := redistest.Client(t, srv.Addr())
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	const n = 5 // callers 0-2 decided, 3 on a hash, 4 leaves
	var hs [n]callerHooks
	var ls [n]*Limiter
	for i := range ls {
		ls[i] = must(New(c, "h", slowBucket, WithPrefix(prefix), WithTimeout(time.Minute), WithHooks(hs[i].hooks())))
	}
	if err := c.HSet(ctx, ls[3].RedisKey("hash"), "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := ls[0].Allow(ctx, "warm"); err != nil {
		t.Fatal(err)
	}
	hs[0] = callerHooks{}
	b := routerFor(c).batch
	// Every turn taken: the callers queue, and the test sends their batch.
	b.mu.Lock()
	b.inFlight = maxBatchesInFlight
	b.mu.Unlock()
	srv.Freeze()
	leave := newEndable(ctx)
	type result struct {
		gid string
		err error
	}
	var results [n]chan result
	for i := range n {
		results[i] = make(chan result, 1)
		key, cctx := "k", context.Context(ctx)
		switch i {
		case 3:
			key = "hash"
		case 4:
			cctx = leave
		}
		go func() {
			_, err := ls[i].Allow(cctx, key)
			results[i] <- result{goid(), err}
		}()
	}
	batcherState(t, b, maxBatchesInFlight, n)
	b.mu.Lock()
	batch := b.takeLocked(nil)
	b.mu.Unlock()
	go b.sendAll(batch) // in flight, on the frozen server
	leave.end()
	left := <-results[4]
	srv.Thaw()
	var got [n]result
	for i := range n - 1 {
		got[i] = <-results[i]
	}
	got[4] = left
	for i, r := range got {
		gids, errs := hs[i].seen()
		if len(gids) != 1 || gids[0] != r.gid {
			t.Fatalf("caller %d (goroutine %s): Call ran on goroutines %v; want once, on the caller's", i, r.gid, gids)
		}
		switch {
		case i < 3:
			if r.err != nil || errs[0] != nil {
				t.Fatalf("caller %d: returned %v, Call saw %v; want nil both", i, r.err, errs[0])
			}
		case i == 3:
			if r.err == nil || errs[0] == nil || !strings.Contains(r.err.Error(), errs[0].Error()) {
				t.Fatalf("caller on a hash: returned %v, Call saw %v; want its script error in both", r.err, errs[0])
			}
		default:
			if !isTimeout(r.err) || !errors.Is(errs[0], context.DeadlineExceeded) {
				t.Fatalf("caller that left: returned %v, Call saw %v; want its deadline in both", r.err, errs[0])
			}
		}
	}
}

// TestBatchTimeoutBoundsEveryCall: with the server frozen for good,
// every decision, in flight (WithTimeout 1s) or queued behind those
// (3s), fails within its timeout as ErrUnavailable, its callers having
// set no deadline: a batched call has no context of its own, and its
// batch's deadline bounds it. The client has no read or write timeout of
// its own, so that nothing else ends a call. The minute's wait is only a
// guard: without the bound, a call would wait for the server to answer,
// which it never does here.
func TestBatchTimeoutBoundsEveryCall(t *testing.T) {
	srv := redistest.StartServer(t, 0)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true,
		ReadTimeout: -1, WriteTimeout: -1, PoolSize: 16, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	br := NewBreaker(1000, time.Hour)
	first := must(New(c, "tb1", slowBucket, WithTimeout(time.Second), WithBreaker(br)))
	then := must(New(c, "tb2", slowBucket, WithTimeout(3*time.Second), WithBreaker(br)))
	if _, err := first.Allow(context.Background(), "warm"); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	const queued = 6
	errs := make(chan error, queued+maxBatchesInFlight)
	call := func(l *Limiter) {
		_, err := l.Allow(context.Background(), "k")
		errs <- err
	}
	for range maxBatchesInFlight {
		go call(first)
	}
	batcherState(t, routerFor(c).batch, maxBatchesInFlight, 0)
	for range queued {
		go call(then)
	}
	guard := time.After(time.Minute)
	for i := range queued + maxBatchesInFlight {
		var err error
		select {
		case err = <-errs:
		case <-guard:
			t.Fatalf("%d calls still waiting for the frozen server a minute on, with timeouts of 1s and 3s", queued+maxBatchesInFlight-i)
		}
		if !errors.Is(err, ErrUnavailable) || !isTimeout(err) {
			t.Fatalf("a call to the frozen server: %v; want ErrUnavailable and a timeout", err)
		}
	}
}
