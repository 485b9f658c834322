package hotlimitd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/hotlimitd/backend"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// storeFixture is a Server on a backend.Store (Local, on a manual
// clock), which takes descriptors' own limits.
type storeFixture struct {
	cfg   *config.Config
	clock *hotlimit.ManualClock
	store *backend.Store
	srv   *hotlimitd.Server
}

func newStoreFixture(t *testing.T, yaml string, opts hotlimitd.Options) *storeFixture {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	f := &storeFixture{cfg: cfg, clock: hotlimit.NewManualClock()}
	f.store, err = backend.Open(context.Background(), backend.Options{Kind: backend.Local, LocalOptions: []hotlimit.Option{hotlimit.WithClock(f.clock), hotlimit.WithSweepInterval(0)}}, cfg.Limits())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.store.Close() })
	opts.Config = func() *config.Config { return f.cfg }
	opts.Backend = f.store
	if f.srv, err = hotlimitd.New(opts); err != nil {
		t.Fatal(err)
	}
	return f
}

// withLimit sets d's own limit.
func withLimit(d *rlv3.RateLimitDescriptor, rpu uint32, unit typev3.RateLimitUnit) *rlv3.RateLimitDescriptor {
	d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
	return d
}

// admits asks req n times and returns how many were admitted, checking
// that the admitted ones come first.
func admits(t *testing.T, srv *hotlimitd.Server, n int, req func() *rlsv3.RateLimitRequest) int {
	t.Helper()
	ok := 0
	for i := range n {
		resp := ask(t, srv, req())
		if resp.OverallCode == rlsv3.RateLimitResponse_OK {
			if ok != i {
				t.Fatalf("request %d admitted after a refusal", i)
			}
			ok++
		}
	}
	return ok
}

// TestOverride: a descriptor's own limit decides it as
// envoyproxy/ratelimit applies one: in place of the rule it matches
// (an unlimited or shadow one too), or of none in a domain the
// configuration has; a fixed window of requests_per_unit per unit,
// reported as the status's current_limit, without a name; none in an
// unknown domain.
func TestOverride(t *testing.T) {
	f := newStoreFixture(t, testYAML, hotlimitd.Options{})
	f.clock.Set(20 * time.Second)
	for _, tc := range []struct {
		name  string
		entry []string
		rpu   uint32
		unit  typev3.RateLimitUnit
		want  int
	}{
		{"in place of the rule's 3", []string{"user", "ann"}, 5, typev3.RateLimitUnit_MINUTE, 5},
		{"no rule matches", []string{"nope", "x"}, 2, typev3.RateLimitUnit_HOUR, 2},
		{"an unlimited rule", []string{"internal", "x"}, 1, typev3.RateLimitUnit_SECOND, 1},
		{"a shadow rule: enforced", []string{"preview", "p"}, 2, typev3.RateLimitUnit_DAY, 2},
		{"two entries", []string{"user", "ann", "path", "/a"}, 4, typev3.RateLimitUnit(7) /* a week, as the response counts units */, 4},
		{"0 refuses every hit", []string{"user", "bob"}, 0, typev3.RateLimitUnit_MINUTE, 0},
	} {
		got := admits(t, f.srv, 8, func() *rlsv3.RateLimitRequest {
			return request("test", withLimit(desc(tc.entry...), tc.rpu, tc.unit))
		})
		if got != tc.want {
			t.Errorf("%s: %d admitted, want %d", tc.name, got, tc.want)
		}
		resp := ask(t, f.srv, request("test", withLimit(desc(tc.entry...), tc.rpu, tc.unit)))
		cl := resp.Statuses[0].CurrentLimit
		if cl == nil || cl.RequestsPerUnit != tc.rpu || cl.Unit != rlsv3.RateLimitResponse_RateLimit_Unit(tc.unit) || cl.Name != "" {
			t.Errorf("%s: current_limit %v", tc.name, cl)
		}
	}
	// The window is the unit's: 40s to the minute's end.
	resp := ask(t, f.srv, request("test", withLimit(desc("user", "cat"), 5, typev3.RateLimitUnit_MINUTE)))
	if remaining(resp)[0] != 4 || seconds(resp, 0) != 40*time.Second {
		t.Errorf("a fresh key: remaining %v, duration_until_reset %v", remaining(resp), seconds(resp, 0))
	}
	// An unknown domain: no limit, as without an override.
	if resp := ask(t, f.srv, request("other", withLimit(desc("user", "ann"), 1, typev3.RateLimitUnit_MINUTE))); resp.Statuses[0].CurrentLimit != nil {
		t.Errorf("unknown domain: %v", resp.Statuses[0])
	}
}

// TestOverrideState: a descriptor's own limit keeps its state apart from
// the rule's and from every other override (a changed override is a new
// limit, starting afresh), per descriptor, by all its entries' keys and
// values; the state lasts across a reload.
func TestOverrideState(t *testing.T) {
	f := newStoreFixture(t, testYAML, hotlimitd.Options{})
	five := func(kv ...string) func() *rlsv3.RateLimitRequest {
		return func() *rlsv3.RateLimitRequest {
			return request("test", withLimit(desc(kv...), 5, typev3.RateLimitUnit_MINUTE))
		}
	}
	if got := admits(t, f.srv, 2, five("user", "ann")); got != 2 {
		t.Fatalf("%d admitted", got)
	}
	// The rule's own state is untouched (3 left), and so is another
	// value's, another key's with the value, and a longer descriptor's.
	if got := remaining(ask(t, f.srv, request("test", desc("user", "ann"))))[0]; got != 2 {
		t.Errorf("the rule: %d left after its first hit, want 2", got)
	}
	for _, kv := range [][]string{{"user", "bob"}, {"tenant", "ann"}, {"user", "ann", "path", "/"}, {"path", "/"}} {
		if got := remaining(ask(t, f.srv, five(kv...)()))[0]; got != 4 {
			t.Errorf("%v: %d left, want 4", kv, got)
		}
	}
	// Another override of the same descriptor starts afresh.
	six := request("test", withLimit(desc("user", "ann"), 6, typev3.RateLimitUnit_MINUTE))
	if got := remaining(ask(t, f.srv, six))[0]; got != 5 {
		t.Errorf("6 a minute: %d left, want 5", got)
	}
	// A reload keeps it: 3 used, 2 left.
	next, err := config.Parse("next.yaml", []byte("domain: test\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 9\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Reload(next.Limits(), func() { f.cfg = next }); err != nil {
		t.Fatal(err)
	}
	if got := remaining(ask(t, f.srv, five("user", "ann")()))[0]; got != 2 {
		t.Errorf("after a reload: %d left, want 2", got)
	}
}

// TestOverrideErrors: a unit that is not one is refused as an invalid
// request, whatever the domain; a backend that takes no limit of its
// own fails the request as unable to decide.
func TestOverrideErrors(t *testing.T) {
	f := newStoreFixture(t, testYAML, hotlimitd.Options{})
	for _, u := range []typev3.RateLimitUnit{typev3.RateLimitUnit_UNKNOWN, 99} {
		for _, domain := range []string{"test", "other"} {
			_, err := f.srv.ShouldRateLimit(context.Background(), request(domain, desc("user", "ann"), withLimit(desc("user", "ann"), 1, u)))
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("unit %v in %s: error %v, want InvalidArgument", u, domain, err)
			}
		}
	}
	l := newFixture(t, testYAML, hotlimitd.Options{})
	_, err := l.srv.ShouldRateLimit(context.Background(), request("test", withLimit(desc("user", "ann"), 1, typev3.RateLimitUnit_MINUTE)))
	if status.Code(err) != codes.Unavailable {
		t.Errorf("admission.Local: error %v, want Unavailable", err)
	}
	// The Store's bound: past it, an override is an error too.
	for i := range backend.MaxAdded {
		if err := f.store.AddLimit("x"+string(rune('a'+i%26))+time.Duration(i).String(), hotlimit.FixedWindow{Limit: 1, Window: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = f.srv.ShouldRateLimit(context.Background(), request("test", withLimit(desc("user", "ann"), 7, typev3.RateLimitUnit_MINUTE)))
	if status.Code(err) != codes.Unavailable {
		t.Errorf("past MaxAdded: error %v, want Unavailable", err)
	}
	if err := f.store.AddLimit("y", hotlimit.FixedWindow{Limit: 1, Window: time.Second}); !errors.Is(err, backend.ErrTooManyLimits) {
		t.Errorf("AddLimit past MaxAdded: %v", err)
	}
}
