package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
	"github.com/hotlimit/hotlimit/httplimit"
)

// tokenKey is ic's layer key of a bearer token in group g, as
// httplimit.TokenKey and MetadataKey write its identity.
func tokenKey(t testing.TB, ic *grpclimit.Interceptor, token, group string) string {
	t.Helper()
	r, _ := http.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	id, err := httplimit.TokenKey("Authorization")(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	return ic.LayerKey(string(id), group)
}

// Under 64 goroutines at a frozen instant, exactly Burst calls pass; every
// other one is ResourceExhausted with the exact RetryInfo delay (one
// emission interval) and the quota in its metadata.
func TestExactBudgetUnderConcurrency(t *testing.T) {
	clock := hotlimit.NewManualClock()
	const burst = 40
	ic := newIC(t, clock, grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"check": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(3), Burst: burst}},
		Groups:       []grpclimit.Group{{Name: "check", Methods: []string{mCheck}, Limit: "check"}},
		DefaultGroup: "check",
		Key:          grpclimit.MetadataKey("authorization"),
	})
	c := serveIC(t, ic)
	ctx := bearer(testCtx(t), "tenant-a-token")

	const goroutines, perG = 64, 4
	var (
		mu       sync.Mutex
		admitted int
		problems []string
		wg       sync.WaitGroup
	)
	const interval = 333_333_334 * time.Nanosecond // ceil(1s / 3)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perG {
				md, err := call(ctx, c)
				mu.Lock()
				if err == nil {
					admitted++
				} else if p := checkDenial(t, md, err, interval, "check", burst); p != "" {
					problems = append(problems, p)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if admitted != burst {
		t.Errorf("admitted %d of %d calls, want exactly %d", admitted, goroutines*perG, burst)
	}
	for i, p := range problems {
		if i == 5 {
			t.Errorf("... and %d more", len(problems)-5)
			break
		}
		t.Error(p)
	}
	if r := remaining(t, ic, "check", tokenKey(t, ic, "tenant-a-token", "check")); r != 0 {
		t.Errorf("limiter state: Remaining %d, want 0", r)
	}
}

// checkDenial describes what is wrong with a quota denial, or "".
func checkDenial(t testing.TB, md metadata.MD, err error, wantDelay time.Duration, name string, limit int64) string {
	d := detailsOf(t, err)
	switch {
	case d.code != codes.ResourceExhausted:
		return fmt.Sprintf("code %v, want ResourceExhausted: %v", d.code, err)
	case d.reason() != grpclimit.ReasonExceeded:
		return fmt.Sprintf("ErrorInfo reason %q, want %q", d.reason(), grpclimit.ReasonExceeded)
	case d.retryDelay() != wantDelay:
		return fmt.Sprintf("RetryInfo delay %v, want %v", d.retryDelay(), wantDelay)
	case d.quota == nil || len(d.quota.Violations) != 1 || d.quota.Violations[0].Subject != "limit:"+name:
		return fmt.Sprintf("QuotaFailure %v, want one violation of limit:%s", d.quota, name)
	}
	wantMD := map[string]string{
		grpclimit.MDLimit:      fmt.Sprint(limit),
		grpclimit.MDRemaining:  "0",
		grpclimit.MDName:       name,
		grpclimit.MDRetryAfter: fmt.Sprint(int64((wantDelay + time.Second - 1) / time.Second)),
		grpclimit.MDPushback:   fmt.Sprint(int64((wantDelay + time.Millisecond - 1) / time.Millisecond)),
	}
	for k, v := range wantMD {
		if got := md.Get(k); len(got) != 1 || got[0] != v {
			return fmt.Sprintf("metadata %s = %q, want %q", k, got, v)
		}
	}
	return ""
}

// The RetryInfo delay is the Decision's RetryAfter to the nanosecond:
// retrying one nanosecond before it is denied (and told 1 ns), retrying
// at it is admitted.
func TestRetryInfoExact(t *testing.T) {
	clock := hotlimit.NewManualClock()
	ic := newIC(t, clock, grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"slow": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(7), Burst: 1}},
		Groups:       []grpclimit.Group{{Name: "all", Limit: "slow"}},
		DefaultGroup: "all",
		Key:          grpclimit.MetadataKey("x-api-key"),
	})
	c := serveIC(t, ic)
	ctx := metadata.AppendToOutgoingContext(testCtx(t), "x-api-key", "k1")

	const interval = 8_571_428_572 * time.Nanosecond // ceil(60s / 7)
	if md, err := call(ctx, c); err != nil {
		t.Fatalf("first call: %v", err)
	} else if one(t, md, grpclimit.MDRemaining) != "0" || one(t, md, grpclimit.MDLimit) != "1" || one(t, md, grpclimit.MDName) != "slow" {
		t.Errorf("admitted call's metadata %v", md)
	} else if one(t, md, grpclimit.MDRetryAfter) != "" {
		t.Errorf("admitted call has retry-after %q", one(t, md, grpclimit.MDRetryAfter))
	}
	clock.Advance(1_234_567)
	want := interval - 1_234_567
	md, err := call(ctx, c)
	if p := checkDenial(t, md, err, want, "slow", 1); p != "" {
		t.Fatal(p)
	}
	clock.Advance(want - 1)
	md, err = call(ctx, c)
	if p := checkDenial(t, md, err, time.Nanosecond, "slow", 1); p != "" {
		t.Fatalf("1 ns early: %s", p)
	}
	clock.Advance(1)
	if _, err := call(ctx, c); err != nil {
		t.Fatalf("at the RetryInfo delay: %v", err)
	}
}

// A call that costs more than the capacity is told "never": no RetryInfo,
// no retry-after, reason RATE_LIMIT_NEVER; it consumes nothing.
func TestNeverDistinguished(t *testing.T) {
	clock := hotlimit.NewManualClock()
	ic := newIC(t, clock, grpclimit.Config{
		Limits: map[string]hotlimit.Policy{"small": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 4}},
		Groups: []grpclimit.Group{{Name: "health", Methods: []string{"/grpc.health.v1.Health/*"}, Limit: "small",
			Costs: map[string]int64{mCheck: 4}}},
		DefaultGroup: "health",
		Key:          grpclimit.MetadataKey("authorization"),
	})
	// New refuses a cost above the capacity; a policy changed at runtime
	// can still leave a method's cost above it.
	if err := ic.Backend().(*admission.Local).Classes().SetPolicy("small", hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 3}); err != nil {
		t.Fatal(err)
	}
	c := serveIC(t, ic)
	ctx := bearer(testCtx(t), "t")
	md, err := call(ctx, c)
	d := detailsOf(t, err)
	if d.code != codes.ResourceExhausted || d.reason() != grpclimit.ReasonNever || d.retry != nil || d.quota == nil {
		t.Fatalf("cost above capacity: code %v reason %q retry %v quota %v", d.code, d.reason(), d.retry, d.quota)
	}
	if got := one(t, md, grpclimit.MDRetryAfter); got != "" {
		t.Errorf("never: retry-after %q", got)
	}
	if got := one(t, md, grpclimit.MDPushback); got != "-1" {
		t.Errorf("never: %s %q, want -1 (do not retry)", grpclimit.MDPushback, got)
	}
	if v := d.quota.Violations; len(v) != 1 || v[0].Subject != "limit:small" || v[0].Description != "cost 4 exceeds the capacity 3" {
		t.Errorf("QuotaFailure %v", d.quota)
	}
	if r := remaining(t, ic, "small", tokenKey(t, ic, "t", "health")); r != 3 {
		t.Errorf("never consumed: Remaining %d, want 3", r)
	}

	// The global layer binds: its name and its cost.
	ic = newIC(t, clock, grpclimit.Config{
		Limits: map[string]hotlimit.Policy{
			"small":  hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 3},
			"global": hotlimit.FixedWindow{Limit: 3, Window: time.Minute},
		},
		Groups:       []grpclimit.Group{{Name: "health", Limit: "small"}},
		DefaultGroup: "health",
		Global:       "global",
		GlobalCost:   3,
		Key:          grpclimit.MetadataKey("authorization"),
	})
	if err := ic.Backend().(*admission.Local).Classes().SetPolicy("global", hotlimit.FixedWindow{Limit: 2, Window: time.Minute}); err != nil {
		t.Fatal(err)
	}
	md, err = call(ctx, serveIC(t, ic))
	d = detailsOf(t, err)
	if d.reason() != grpclimit.ReasonNever || d.retry != nil || one(t, md, grpclimit.MDName) != "global" {
		t.Fatalf("GlobalCost above capacity: reason %q retry %v metadata %v", d.reason(), d.retry, md)
	}
	if v := d.quota.Violations; len(v) != 1 || v[0].Subject != "limit:global" || v[0].Description != "cost 3 exceeds the capacity 2" {
		t.Errorf("QuotaFailure %v", d.quota)
	}
	if r := remaining(t, ic, "small", tokenKey(t, ic, "t", "health")); r != 3 {
		t.Errorf("group layer consumed by a call the global layer can never admit: Remaining %d", r)
	}
}

// Layers are all-or-nothing: a call the group denies leaves the global
// layer untouched, a call the global layer denies leaves its group's
// untouched, and the metadata names the binding limit.
func TestGlobalLayerAllOrNothing(t *testing.T) {
	clock := hotlimit.NewManualClock()
	ic := newIC(t, clock, grpclimit.Config{
		Limits: map[string]hotlimit.Policy{
			"check":  hotlimit.FixedWindow{Limit: 3, Window: time.Minute},
			"list":   hotlimit.FixedWindow{Limit: 10, Window: time.Minute},
			"global": hotlimit.FixedWindow{Limit: 5, Window: time.Hour},
		},
		Groups: []grpclimit.Group{
			{Name: "check", Methods: []string{mCheck}, Limit: "check"},
			{Name: "list", Methods: []string{mList}, Limit: "list"},
		},
		DefaultGroup: "check",
		Global:       "global",
		Key:          grpclimit.MetadataKey("authorization"),
	})
	c := serveIC(t, ic)
	ctx := bearer(testCtx(t), "tok")
	gkey := tokenKey(t, ic, "tok", "")
	for i := range 3 {
		md, err := call(ctx, c)
		if err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
		// check has 3-i-1 left, global 5-i-1: check binds.
		if one(t, md, grpclimit.MDName) != "check" || one(t, md, grpclimit.MDRemaining) != fmt.Sprint(2-i) {
			t.Errorf("check %d: metadata %v", i, md)
		}
	}
	md, err := call(ctx, c)
	if p := checkDenial(t, md, err, time.Minute, "check", 3); p != "" {
		t.Fatalf("4th check: %s", p)
	}
	if r := remaining(t, ic, "global", gkey); r != 2 {
		t.Fatalf("global after a group denial: Remaining %d, want 2 (nothing consumed)", r)
	}
	list := func() (metadata.MD, error) {
		var hdr, trl metadata.MD
		_, err := c.List(ctx, &healthpb.HealthListRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl))
		if err != nil {
			return trl, err // a refusal's metadata is in the trailers
		}
		return hdr, err
	}
	for i := range 2 {
		if _, err := list(); err != nil {
			t.Fatalf("list %d: %v", i, err)
		}
	}
	md, err = list()
	if p := checkDenial(t, md, err, time.Hour, "global", 5); p != "" {
		t.Fatalf("list past the global limit: %s", p)
	}
	if r := remaining(t, ic, "list", tokenKey(t, ic, "tok", "list")); r != 8 {
		t.Errorf("list after a global denial: Remaining %d, want 8 (nothing consumed)", r)
	}
}

// A stream is limited when it opens: past the budget, the stream fails
// with the same status, details and header metadata as a unary call.
func TestStreamInterceptor(t *testing.T) {
	clock := hotlimit.NewManualClock()
	ic := newIC(t, clock, grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"watch": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(2), Burst: 2}},
		Groups:       []grpclimit.Group{{Name: "watch", Methods: []string{mWatch}, Limit: "watch"}},
		DefaultGroup: "watch",
		Key:          grpclimit.MetadataKey("authorization"),
	})
	c := serveIC(t, ic)
	ctx, cancel := context.WithCancel(bearer(testCtx(t), "w"))
	defer cancel()
	for i := range 2 {
		s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		md, _ := s.Header()
		if one(t, md, grpclimit.MDRemaining) != fmt.Sprint(1-i) || one(t, md, grpclimit.MDName) != "watch" {
			t.Errorf("stream %d header %v", i, md)
		}
	}
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	md := s.Trailer() // a refusal's metadata is in the trailers
	if p := checkDenial(t, md, err, 500*time.Millisecond, "watch", 2); p != "" {
		t.Fatalf("third stream: %s", p)
	}
}

// Without a key: the default refuses with RATE_LIMIT_KEY_MISSING and no
// RetryInfo; FallbackToIP limits by the peer's IP instead.
func TestKeyError(t *testing.T) {
	clock := hotlimit.NewManualClock()
	cfg := grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}},
		Groups:       []grpclimit.Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          grpclimit.MetadataKey("authorization"),
	}
	var (
		mu     sync.Mutex
		logged []string
	)
	cfg.OnError = func(_ context.Context, method string, err error) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, method+": "+err.Error())
	}
	c := serveIC(t, newIC(t, clock, cfg))
	ctx := testCtx(t)
	md, err := call(metadata.AppendToOutgoingContext(ctx, "authorization", "Basic dTpw"), c)
	d := detailsOf(t, err)
	if d.code != codes.ResourceExhausted || d.reason() != grpclimit.ReasonKeyMissing || d.retry != nil {
		t.Fatalf("no bearer token: code %v reason %q retry %v", d.code, d.reason(), d.retry)
	}
	mu.Lock()
	if want := mCheck + ": " + grpclimit.ErrNoKey.Error(); len(logged) != 1 || logged[0] != want {
		t.Errorf("OnError saw %q, want [%q]", logged, want)
	}
	mu.Unlock()
	if strings.Contains(status.Convert(err).Message(), grpclimit.ErrNoKey.Error()) {
		t.Errorf("the key error's text reached the client: %q", status.Convert(err).Message())
	}
	if len(md.Get(grpclimit.MDLimit)) != 0 {
		t.Errorf("key failure has quota metadata %v", md)
	}

	cfg.FallbackToIP = true
	ic := newIC(t, clock, cfg)
	c = serveIC(t, ic)
	if _, err := call(ctx, c); err != nil {
		t.Fatalf("fallback to the peer: %v", err)
	}
	if r := remaining(t, ic, "l", ic.LayerKey("ip:127.0.0.1", "g")); r != 4 {
		t.Errorf("peer key after one call: Remaining %d, want 4", r)
	}

	// An IdentityLimit's FallbackToIP keys its own layer by the peer's IP
	// when its Key finds no identity; without it the call is refused.
	for _, fallback := range []bool{false, true} {
		cfg := cfg
		cfg.FallbackToIP = false
		cfg.Limits = map[string]hotlimit.Policy{"l": cfg.Limits["l"], "t": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}}
		cfg.Identities = []grpclimit.IdentityLimit{{Limit: "t", Key: grpclimit.MetadataKey("x-tenant"), FallbackToIP: fallback}}
		ic := newIC(t, clock, cfg)
		_, err := call(bearer(ctx, "tok"), serveIC(t, ic))
		if !fallback {
			if d := detailsOf(t, err); d.code != codes.ResourceExhausted || d.reason() != grpclimit.ReasonKeyMissing {
				t.Errorf("identity without a key: code %v reason %q", d.code, d.reason())
			}
			continue
		}
		if err != nil {
			t.Fatalf("identity layer's fallback to the peer: %v", err)
		}
		if r := remaining(t, ic, "t", ic.LayerKey("ip:127.0.0.1", "")); r != 4 {
			t.Errorf("identity layer's peer key after one call: Remaining %d, want 4", r)
		}
	}
}

// failing is a Backend that cannot decide, nor reset.
type failing struct{}

var errStoreDown = errors.New("store down")

func (failing) AllowStates(context.Context, []admission.Layer, []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	return hotlimit.Decision{}, -1, errStoreDown
}

func (failing) Reset(context.Context, string, string) error { return errStoreDown }

func (failing) Close() error { return nil }

// A backend failure is Unavailable when failing closed (the default) and
// lets the call through with Config.FailOpen; neither sends quota metadata.
func TestBackendError(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		var (
			mu     sync.Mutex
			logged []error
		)
		ic := newIC(t, nil, grpclimit.Config{
			OnError: func(_ context.Context, _ string, err error) {
				mu.Lock()
				defer mu.Unlock()
				logged = append(logged, err)
			},
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}},
			Groups:       []grpclimit.Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          grpclimit.MetadataKey("authorization"),
			FailOpen:     failOpen,
			Backend:      func(map[string]hotlimit.Policy) (admission.Backend, error) { return failing{}, nil },
		})
		md, err := call(bearer(testCtx(t), "x"), serveIC(t, ic))
		mu.Lock()
		if len(logged) != 1 || logged[0].Error() != "store down" {
			t.Errorf("FailOpen %v: OnError saw %v", failOpen, logged)
		}
		mu.Unlock()
		if len(md.Get(grpclimit.MDLimit)) != 0 {
			t.Errorf("FailOpen %v: metadata %v", failOpen, md)
		}
		if failOpen {
			if err != nil {
				t.Errorf("FailOpen: %v", err)
			}
			continue
		}
		if d := detailsOf(t, err); d.code != codes.Unavailable || d.reason() != grpclimit.ReasonUnavailable || d.retry != nil {
			t.Errorf("fail closed: code %v reason %q retry %v", d.code, d.reason(), d.retry)
		}
	}
}

// An exact method name wins over its service's wildcard; other services'
// methods are in the default group; an exempt group is never limited and
// gets no metadata; Costs charges per method.
func TestMethodGroups(t *testing.T) {
	clock := hotlimit.NewManualClock()
	ic := newIC(t, clock, grpclimit.Config{
		Limits: map[string]hotlimit.Policy{
			"a": hotlimit.FixedWindow{Limit: 100, Window: time.Minute},
			"b": hotlimit.FixedWindow{Limit: 100, Window: time.Minute},
		},
		Groups: []grpclimit.Group{
			{Name: "check", Methods: []string{mCheck}, Limit: "a", Cost: 2},
			{Name: "health", Methods: []string{"/grpc.health.v1.Health/*"}, Limit: "b", Costs: map[string]int64{mList: 7}},
			{Name: "other", Methods: []string{"/other.Svc/*"}, Exempt: true},
		},
		DefaultGroup: "health",
		Key:          grpclimit.MetadataKey("authorization"),
	})
	c := serveIC(t, ic)
	ctx := bearer(testCtx(t), "m")
	if _, err := call(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(ctx, &healthpb.HealthListRequest{}); err != nil {
		t.Fatal(err)
	}
	if r := remaining(t, ic, "a", tokenKey(t, ic, "m", "check")); r != 98 {
		t.Errorf("check group: Remaining %d, want 98 (Cost 2)", r)
	}
	if r := remaining(t, ic, "b", tokenKey(t, ic, "m", "health")); r != 93 {
		t.Errorf("health group: Remaining %d, want 93 (List costs 7)", r)
	}

	// Exempt: the default group is exempt here; no key is needed.
	ic = newIC(t, clock, grpclimit.Config{
		Limits: map[string]hotlimit.Policy{"a": hotlimit.FixedWindow{Limit: 1, Window: time.Minute}},
		Groups: []grpclimit.Group{
			{Name: "watch", Methods: []string{mWatch}, Limit: "a"},
			{Name: "free", Exempt: true},
		},
		DefaultGroup: "free",
		Key:          grpclimit.MetadataKey("authorization"),
	})
	c = serveIC(t, ic)
	for range 3 {
		md, err := call(testCtx(t), c)
		if err != nil || len(md.Get(grpclimit.MDLimit)) != 0 {
			t.Fatalf("exempt call: err %v, metadata %v", err, md)
		}
	}
}

// A LeakyBucket's Delay is waited out before the handler runs; a wait
// cut short by the context fails the call with the context's code.
func TestLeakyDelay(t *testing.T) {
	clock := hotlimit.NewManualClock()
	var (
		mu    sync.Mutex
		waits []time.Duration
		fail  error
	)
	ic := newIC(t, clock, grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"shape": hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 3}},
		Groups:       []grpclimit.Group{{Name: "g", Limit: "shape"}},
		DefaultGroup: "g",
		Key:          grpclimit.MetadataKey("authorization"),
		Wait: func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, d)
			return fail
		},
	})
	c := serveIC(t, ic)
	ctx := bearer(testCtx(t), "l")
	for i := range 3 {
		if _, err := call(ctx, c); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v (the first call starts at once)", waits, want)
	}
	fail = context.DeadlineExceeded
	if _, err := call(ctx, c); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("wait cut short: %v, want DeadlineExceeded", err)
	}
	md, err := call(ctx, c)
	if p := checkDenial(t, md, err, 100*time.Millisecond, "shape", 4); p != "" {
		t.Errorf("past the queue: %s", p)
	}
}

// allowOnly is a backend that can tell neither which layer bound nor the
// layers' states.
type allowOnly struct{ *admission.Local }

func (b allowOnly) AllowStates(ctx context.Context, layers []admission.Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	for i := range states {
		states[i] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: -1}}
	}
	d, _, err := b.Local.AllowStates(ctx, layers, nil)
	return d, -1, err
}

// With a backend that does not report the binding layer, the metadata
// and the QuotaFailure name no limit rather than guess one.
func TestNoBindingBackend(t *testing.T) {
	clock := hotlimit.NewManualClock()
	ic := newIC(t, clock, grpclimit.Config{
		Limits: map[string]hotlimit.Policy{
			"g":      hotlimit.FixedWindow{Limit: 2, Window: time.Minute},
			"global": hotlimit.FixedWindow{Limit: 2, Window: time.Minute},
		},
		Groups:       []grpclimit.Group{{Name: "g", Limit: "g"}},
		DefaultGroup: "g",
		Global:       "global",
		Key:          grpclimit.MetadataKey("authorization"),
		Backend: func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
			b, err := admission.LocalBackend(hotlimit.WithClock(clock))(limits)
			l, _ := b.(*admission.Local)
			return allowOnly{l}, err
		},
	})
	c := serveIC(t, ic)
	ctx := bearer(testCtx(t), "nb")
	for range 2 {
		md, err := call(ctx, c)
		if err != nil || one(t, md, grpclimit.MDName) != "" || one(t, md, grpclimit.MDLimit) != "2" {
			t.Fatalf("admitted: err %v, metadata %v", err, md)
		}
	}
	md, err := call(ctx, c)
	d := detailsOf(t, err)
	if d.reason() != grpclimit.ReasonExceeded || d.retryDelay() != time.Minute || one(t, md, grpclimit.MDName) != "" {
		t.Fatalf("denied: reason %q delay %v metadata %v", d.reason(), d.retryDelay(), md)
	}
	if d.quota == nil || len(d.quota.Violations) != 1 || d.quota.Violations[0].Subject != "limit" {
		t.Errorf("QuotaFailure %v, want subject \"limit\"", d.quota)
	}
}

// Streams opened by 32 goroutines at a frozen instant: exactly Burst of
// them are admitted, the rest refused with the exact RetryInfo.
func TestStreamExactBudgetUnderConcurrency(t *testing.T) {
	clock := hotlimit.NewManualClock()
	const burst = 10
	ic := newIC(t, clock, grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"watch": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(4), Burst: burst}},
		Groups:       []grpclimit.Group{{Name: "watch", Methods: []string{mWatch}, Limit: "watch"}},
		DefaultGroup: "watch",
		Key:          grpclimit.MetadataKey("authorization"),
	})
	c := serveIC(t, ic)
	var (
		mu       sync.Mutex
		admitted int
		problems []string
		wg       sync.WaitGroup
	)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(bearer(testCtx(t), "streams"))
			defer cancel()
			s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = s.Recv()
			}
			var md metadata.MD
			if s != nil {
				md = s.Trailer() // a refusal's metadata is in the trailers
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				admitted++
			} else if p := checkDenial(t, md, err, 250*time.Millisecond, "watch", burst); p != "" {
				problems = append(problems, p)
			}
		}()
	}
	wg.Wait()
	if admitted != burst {
		t.Errorf("admitted %d streams, want exactly %d", admitted, burst)
	}
	if len(problems) > 0 {
		t.Errorf("%d bad denials, first: %s", len(problems), problems[0])
	}
}
