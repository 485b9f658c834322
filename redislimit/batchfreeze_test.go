package redislimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit/redislimit/redistest"
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
		return must(New(c, "qd", slowBucket, WithTimeout(time.Minute), WithBreaker(NewBreaker(DefaultFailures, time.Hour))))
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
		if err := <-errs; !errors.Is(err, ErrUnavailable) || !IsTimeout(err) {
			t.Fatalf("a queued call whose deadline passed: %v; want ErrUnavailable and a timeout", err)
		}
	}
	if st := l.breaker.State(srv.Addr()); st != BreakerClosed {
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
