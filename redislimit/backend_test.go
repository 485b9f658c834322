package redislimit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestBackendMatchesLocal: the Redis backend and httplimit's in-process
// one give the same decisions for the same layered requests (they differ
// only in the instant: Redis's clock against the process's, so the test
// compares Allowed and Remaining).
func TestBackendMatchesLocal(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	limits := map[string]hotlimit.Policy{
		"token": hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 24 * time.Hour}, Burst: 5},
		"ip":    hotlimit.SlidingWindow{Limit: 8, Window: 24 * time.Hour},
	}
	rb := must(BackendFactory(c, WithPrefix(redistest.Prefix(t)), WithTimeout(5*time.Second))(limits))
	lb := must(admission.LocalBackend()(limits))
	ctx := context.Background()
	reqs := [][]admission.Layer{
		{{Limit: "token", Key: "t1", Cost: 1}, {Limit: "ip", Key: "1.2.3.4", Cost: 1}},
		{{Limit: "token", Key: "t1", Cost: 3}, {Limit: "ip", Key: "1.2.3.4", Cost: 1}},
		{{Limit: "token", Key: "t2", Cost: 4}, {Limit: "ip", Key: "1.2.3.4", Cost: 4}},
		{{Limit: "token", Key: "t2", Cost: 1}, {Limit: "ip", Key: "1.2.3.4", Cost: 3}}, // ip denies: t2 keeps its unit
		{{Limit: "token", Key: "t2", Cost: 1}},
		{{Limit: "token", Key: "t1", Cost: 2}, {Limit: "ip", Key: "5.6.7.8", Cost: 1}},
	}
	for i, ls := range reqs {
		want := must(allow(ctx, lb, ls))
		got := must(allow(ctx, rb, ls))
		if want.Allowed != got.Allowed || want.Remaining != got.Remaining || want.Limit != got.Limit {
			t.Fatalf("request %d: local %+v, redis %+v", i, want, got)
		}
	}
	if _, err := allow(ctx, rb, []admission.Layer{{Limit: "nope", Key: "k", Cost: 1}}); !errors.Is(err, admission.ErrUnknownLimit) {
		t.Fatalf("unknown limit: %v", err)
	}
}

func TestBackendErrors(t *testing.T) {
	c := redistest.Client(t, "127.0.0.1:1") // nothing listens there
	_, err := BackendFactory(c)(map[string]hotlimit.Policy{"ok": hotlimit.FixedWindow{Limit: 1, Window: time.Second}, "log": hotlimit.SlidingLog{Limit: 2000, Window: time.Second}})
	if err == nil || !strings.Contains(err.Error(), `limit "log"`) {
		t.Fatalf("a SlidingLog limit over 1024: %v; want an error naming it", err)
	}
	limits := map[string]hotlimit.Policy{"a": hotlimit.FixedWindow{Limit: 2, Window: time.Hour}}
	ls := []admission.Layer{{Limit: "a", Key: "k", Cost: 1}}
	ctx := context.Background()
	// Without a failure policy, the error goes to the middleware.
	if _, err := allow(ctx, must(BackendFactory(c)(limits)), ls); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("unreachable Redis: %v; want ErrUnavailable", err)
	}
	// With one, the backend decides: here in process.
	fb := must(BackendFactory(c, WithFallbackLocal())(limits))
	defer fb.(*RedisBackend).Close()
	for i, want := range []bool{true, true, false} {
		d, err := allow(ctx, fb, ls)
		if err != nil || d.Allowed != want {
			t.Fatalf("fallback request %d: %+v, %v; want Allowed %v", i, d, err, want)
		}
	}
}

// allow decides ls through b, as a Pipeline does without the states.
func allow(ctx context.Context, b admission.Backend, ls []admission.Layer) (hotlimit.Decision, error) {
	d, _, err := b.AllowStates(ctx, ls, nil)
	return d, err
}
