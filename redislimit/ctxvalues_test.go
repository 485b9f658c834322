package redislimit

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// spanKey is the context key of a value a go-redis hook reads, as a
// tracing hook reads its parent span.
type spanKey struct{}

func withSpan(ctx context.Context, span string) context.Context {
	return context.WithValue(ctx, spanKey{}, span)
}

// spanHook is a go-redis hook that records the span value of the context
// each script call (EVALSHA, EVAL) is processed with ("" for none), one
// per script run.
type spanHook struct {
	mu    sync.Mutex
	spans []string
}

func (h *spanHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *spanHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		// A NOSCRIPT reply (the script sent again as EVAL) is not counted.
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && !redis.HasErrorPrefix(err, "NOSCRIPT") {
			s, _ := ctx.Value(spanKey{}).(string)
			h.mu.Lock()
			h.spans = append(h.spans, s)
			h.mu.Unlock()
		}
		return err
	}
}

func (h *spanHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// take returns the spans recorded since the last take.
func (h *spanHook) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.spans
	h.spans = nil
	return s
}

// TestContextValuesSingle: a go-redis hook sees the caller's context
// values on every path to one server: a decision sent alone, a give-back
// and a Reset (ops.lua), and a batch, which carries its first decision's
// caller's values (doc.go).
func TestContextValuesSingle(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	var h spanHook
	c.AddHook(&h)
	ctx := context.Background()
	l := must(New(c, "cv", slowBucket, WithPrefix(redistest.Prefix(t)), WithTimeout(time.Minute)))
	var a Admission
	if d, err := l.AdmitN(withSpan(ctx, "admit"), &a, "k", 1); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if _, err := a.Refund(withSpan(ctx, "refund")); err != nil {
		t.Fatal(err)
	}
	if err := l.Reset(withSpan(ctx, "reset"), "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allow(withSpan(ctx, "alone"), "k"); err != nil {
		t.Fatal(err)
	}
	if got, want := h.take(), []string{"admit", "refund", "reset", "alone"}; !slices.Equal(got, want) {
		t.Fatalf("the hook saw spans %q, want %q", got, want)
	}

	// Every turn taken: three callers queue, one after the other, and
	// the test sends their batch.
	b := routerFor(c).batch
	b.mu.Lock()
	b.inFlight = maxBatchesInFlight
	b.mu.Unlock()
	done := make(chan error, 3)
	for i, span := range []string{"first", "second", "third"} {
		go func() {
			_, err := l.Allow(withSpan(ctx, span), "k")
			done <- err
		}()
		batcherState(t, b, maxBatchesInFlight, i+1)
	}
	b.mu.Lock()
	batch := b.takeLocked(nil)
	b.mu.Unlock()
	go b.sendAll(batch)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := h.take(); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("the hook saw spans %q for one batch of three; want the first caller's, once", got)
	}
}

// TestContextValuesCluster: on a Redis Cluster, a go-redis hook installed
// on the nodes' clients (OnNewNode, as redisotel's tracing does) sees the
// caller's context values for a decision and for a give-back.
func TestContextValuesCluster(t *testing.T) {
	c := redistest.ClusterClient(t, redistest.ClusterAddrs(t))
	var h spanHook
	c.OnNewNode(func(n *redis.Client) { n.AddHook(&h) })
	ctx := context.Background()
	l := must(New(c, "cvc", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 100}, WithPrefix(redistest.Prefix(t)), WithTimeout(time.Minute)))
	var a Admission
	if d, err := l.AdmitN(withSpan(ctx, "admit"), &a, "k", 1); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if _, err := a.Refund(withSpan(ctx, "refund")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allow(withSpan(ctx, "alone"), "k"); err != nil {
		t.Fatal(err)
	}
	if got, want := h.take(), []string{"admit", "refund", "alone"}; !slices.Equal(got, want) {
		t.Fatalf("the hook saw spans %q, want %q", got, want)
	}
}
