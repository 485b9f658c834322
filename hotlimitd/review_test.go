package hotlimitd_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// reviewYAML has a fixed window of 3 a minute per user, a path limit,
// and a rule that refuses every hit.
const reviewYAML = `domain: test
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 3
  - key: tb
    rate_limit:
      unit: minute
      requests_per_unit: 3
      algorithm: token_bucket
  - key: path
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: block
    rate_limit:
      unit: minute
      requests_per_unit: 0
`

// TestDuplicateDescriptors: descriptors of one request that share a
// limit and a key are one limit, decided for the sum of their costs; so
// each of them has the same status, and a refusal marks every one of
// them OVER_LIMIT (not only the one the backend names as binding), over
// gRPC on loopback, for a window and a bucket.
func TestDuplicateDescriptors(t *testing.T) {
	f := newFixture(t, reviewYAML, hotlimitd.Options{})
	f.clock.Set(15 * time.Second)
	cl := overGRPC{c: serve(t, f.srv)}
	call := func(req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse { t.Helper(); return ask(t, cl, req) }
	for _, key := range []string{"user", "tb"} {
		// 1+1 of 3: admitted, both see 1 left.
		resp := call(request("test", desc(key, "a"), desc(key, "a"), desc("path", key)))
		if got := codesOf(resp); got != "OK OK OK" {
			t.Fatalf("%s: first pair: codes %s", key, got)
		}
		if got := remaining(resp); !slices.Equal(got, []int64{1, 1, 9}) {
			t.Fatalf("%s: first pair: remaining %v, want [1 1 9]", key, got)
		}
		// 1+1 of the 1 left: refused as a whole; both are over.
		resp = call(request("test", desc(key, "a"), desc(key, "a"), desc("path", key)))
		if got := codesOf(resp); got != "OVER_LIMIT OVER_LIMIT OK" {
			t.Fatalf("%s: second pair: codes %s, want both duplicates OVER_LIMIT", key, got)
		}
		if got := remaining(resp); !slices.Equal(got, []int64{1, 1, 9}) {
			t.Fatalf("%s: second pair: remaining %v, want [1 1 9] (nothing consumed)", key, got)
		}
		// 2+2 of 3 on a fresh key: refused, both over, nothing taken.
		resp = call(request("test", withHits(desc(key, "b"), 2), desc("path", key+"q"), withHits(desc(key, "b"), 2)))
		if got := codesOf(resp); got != "OVER_LIMIT OK OVER_LIMIT" {
			t.Fatalf("%s: 2+2: codes %s, want both duplicates OVER_LIMIT", key, got)
		}
		if got := remaining(call(request("test", desc(key, "b")))); got[0] != 2 {
			t.Fatalf("%s: after the refused 2+2: remaining %v, want 2", key, got)
		}
	}
}

// TestRefusingRuleRetryAfter: a request refused by a rule with
// requests_per_unit 0 never passes, so its headers have no Retry-After
// (the other limits of the request were only read, and admitted).
func TestRefusingRuleRetryAfter(t *testing.T) {
	f := newFixture(t, reviewYAML, hotlimitd.Options{Headers: true})
	resp := ask(t, f.srv, request("test", desc("block", "x"), desc("user", "a")))
	if got := codesOf(resp); got != "OVER_LIMIT OK" {
		t.Fatalf("codes %s", got)
	}
	h := headers(resp)
	if ra, ok := h["Retry-After"]; ok {
		t.Fatalf("Retry-After %q on a request a refusing rule refused: it never passes", ra)
	}
	if h["RateLimit"] == "" {
		t.Fatalf("headers %v: want RateLimit for the user limit", h)
	}
}

// TestRefusingRuleBackendDown: a request that a rule with
// requests_per_unit 0 refuses is refused without the backend, so a
// backend that cannot decide does not turn it into an error, nor, with
// FailOpen, into an admission.
func TestRefusingRuleBackendDown(t *testing.T) {
	for _, open := range []bool{false, true} {
		f := newFixture(t, reviewYAML, hotlimitd.Options{Backend: failing{}, FailOpen: open})
		resp, err := f.srv.ShouldRateLimit(context.Background(), request("test", desc("user", "a"), desc("block", "x")))
		if err != nil {
			t.Fatalf("FailOpen %v: %v", open, err)
		}
		checkInvariants(t, request("test", desc("user", "a"), desc("block", "x")), resp)
		if got := codesOf(resp); got != "OK OVER_LIMIT" {
			t.Fatalf("FailOpen %v: codes %s, want OK OVER_LIMIT", open, got)
		}
		if st := f.srv.Stats(); st.OverLimit != 1 || st.FailedOpen != 0 || st.FailedClosed != 0 {
			t.Fatalf("FailOpen %v: Stats %+v", open, st)
		}
	}
}

// TestLongKey: a descriptor whose key (its entries' values) is longer
// than hotlimit.MaxKeyLen is refused like a rule that refuses every hit:
// OVER_LIMIT without a duration_until_reset (it never passes), no
// Retry-After, and the request's other limits only read, on every
// backend alike (no backend keeps state for such a key).
func TestLongKey(t *testing.T) {
	f := newFixture(t, reviewYAML, hotlimitd.Options{Headers: true})
	long := strings.Repeat("k", hotlimit.MaxKeyLen+1)
	req := request("test", desc("path", "p"), desc("user", long))
	resp := ask(t, f.srv, req)
	if got := codesOf(resp); got != "OK OVER_LIMIT" {
		t.Fatalf("codes %s", got)
	}
	if d := resp.Statuses[1].DurationUntilReset; d != nil {
		t.Fatalf("the long key's duration_until_reset %v with limit_remaining %d: it never passes", d.AsDuration(), resp.Statuses[1].LimitRemaining)
	}
	if got := remaining(resp); got[0] != 10 {
		t.Fatalf("remaining %v: the path limit was only read, want 10", got)
	}
	if ra, ok := headers(resp)["Retry-After"]; ok {
		t.Fatalf("Retry-After %q for a key that never passes", ra)
	}
	// Exactly MaxKeyLen is a key like any other.
	ok := strings.Repeat("k", hotlimit.MaxKeyLen-3) // the key holds a 3-byte length prefix
	if got := codesOf(ask(t, f.srv, request("test", desc("user", ok)))); got != "OK" {
		t.Fatalf("a key of MaxKeyLen bytes: %s", got)
	}
}

// TestObserversRefusingRule: the event of a request that a rule with
// requests_per_unit 0 refused says it was refused for good, not allowed
// (the backend only read the request's other limits, admitting cost 0),
// so that promlimit's and otellimit's counts agree with the answer.
func TestObserversRefusingRule(t *testing.T) {
	var outcomes []admission.Outcome
	obs := observerFunc(func(_ context.Context, ev *admission.Event) {
		outcomes = append(outcomes, ev.Result.Outcome)
	})
	f := newFixture(t, reviewYAML, hotlimitd.Options{Observers: []admission.Observer{obs}})
	resp := ask(t, f.srv, request("test", desc("user", "a"), desc("block", "x")))
	if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("overall %v", resp.OverallCode)
	}
	if want := []admission.Outcome{admission.OutcomeDeniedNever}; !slices.Equal(outcomes, want) {
		t.Fatalf("outcomes %v, want %v", outcomes, want)
	}
}

// TestCurrentLimitName: current_limit.name is the rule's rate_limit name,
// "" when it has none, as envoyproxy/ratelimit answers (Envoy shows it to
// clients, in x-ratelimit-limit's name); hotlimit's own limit name (the
// rule's place and policy) stays inside the service.
func TestCurrentLimitName(t *testing.T) {
	f := newFixture(t, `domain: test
descriptors:
  - key: user
    rate_limit:
      name: per_user
      unit: minute
      requests_per_unit: 3
  - key: path
    rate_limit:
      unit: minute
      requests_per_unit: 3
`, hotlimitd.Options{})
	resp := ask(t, f.srv, request("test", desc("user", "a"), desc("path", "p")))
	if got := resp.Statuses[0].CurrentLimit.GetName(); got != "per_user" {
		t.Errorf("current_limit.name %q, want the rule's name per_user", got)
	}
	if got := resp.Statuses[1].CurrentLimit.GetName(); got != "" {
		t.Errorf("current_limit.name %q for a rule without a name, want \"\"", got)
	}
}

// limitName returns the Name (hotlimit's, the backend's) of the limit
// that entries (key, value pairs) match in domain of cfg.
func limitName(t testing.TB, cfg *config.Config, domain string, kv ...string) string {
	t.Helper()
	var es []config.Entry
	for i := 0; i+1 < len(kv); i += 2 {
		es = append(es, config.Entry{Key: kv[i], Value: kv[i+1]})
	}
	l, _, ok := cfg.Match(nil, domain, es)
	if !ok {
		t.Fatalf("no limit for %v in %s", kv, domain)
	}
	return l.Name
}

// TestInvalidUTF8: a descriptor value that is not UTF-8 (Envoy sends a
// header's bytes as they came; it logs but does not refuse them) is
// decided on its bytes over gRPC with hotlimitd.ServerOption: gRPC's
// protobuf codec alone refuses the request (codes.Internal), and Envoy
// then lets it through unlimited. Distinct bytes are distinct keys.
func TestInvalidUTF8(t *testing.T) {
	f := newFixture(t, reviewYAML, hotlimitd.Options{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(hotlimitd.ServerOption())
	f.srv.Register(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	call := func(value string, hits uint64) (*rlsv3.RateLimitResponse, error) {
		resp := new(rlsv3.RateLimitResponse)
		err := conn.Invoke(context.Background(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
			wireRequest("test", value, hits), resp, grpc.ForceCodecV2(rawCodec{}))
		return resp, err
	}
	for i, want := range []int64{2, 1, 0} {
		resp, err := call("a\xffb", 0)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if got := remaining(resp); resp.OverallCode != rlsv3.RateLimitResponse_OK || got[0] != want {
			t.Fatalf("request %d: %v, remaining %v, want %d", i, resp.OverallCode, got, want)
		}
	}
	if resp, err := call("a\xffb", 0); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("4th request: %v, %v; want OVER_LIMIT", resp, err)
	}
	if resp, err := call("a\xfeb", 2); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK || remaining(resp)[0] != 1 {
		t.Fatalf("another value, 2 hits: %v, %v; want OK, 1 left", resp, err)
	}
	// Malformed bytes are still refused.
	bad := rawMessage(append(wireRequest("test", "x", 0), 0x12, 0x05, 0x0a))
	err = conn.Invoke(context.Background(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
		bad, new(rlsv3.RateLimitResponse), grpc.ForceCodecV2(rawCodec{}))
	if status.Code(err) != codes.Internal {
		t.Fatalf("a truncated request: %v, want Internal", err)
	}
}

// rawMessage is a request's wire bytes, sent as they are by rawCodec.
type rawMessage []byte

// wireRequest encodes a RateLimitRequest of domain with one descriptor
// (user, value), with hits_addend when hits > 0, by hand: protobuf's
// Marshal refuses a string that is not UTF-8.
func wireRequest(domain, value string, hits uint64) rawMessage {
	var e, d, r []byte
	e = protowire.AppendTag(e, 1, protowire.BytesType)
	e = protowire.AppendString(e, "user")
	e = protowire.AppendTag(e, 2, protowire.BytesType)
	e = protowire.AppendString(e, value)
	d = protowire.AppendTag(d, 1, protowire.BytesType)
	d = protowire.AppendBytes(d, e)
	if hits > 0 {
		var h []byte
		h = protowire.AppendTag(h, 1, protowire.VarintType)
		h = protowire.AppendVarint(h, hits)
		d = protowire.AppendTag(d, 3, protowire.BytesType)
		d = protowire.AppendBytes(d, h)
	}
	r = protowire.AppendTag(r, 1, protowire.BytesType)
	r = protowire.AppendString(r, domain)
	r = protowire.AppendTag(r, 2, protowire.BytesType)
	r = protowire.AppendBytes(r, d)
	return r
}

// rawCodec sends a rawMessage as it is and reads answers as protobuf.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(rawMessage))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// overGRPC asks a RateLimitServiceClient, as ask's server.
type overGRPC struct {
	rlsv3.UnimplementedRateLimitServiceServer
	c rlsv3.RateLimitServiceClient
}

func (o overGRPC) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return o.c.ShouldRateLimit(ctx, req)
}

// TestObserversOnceOnRetry: a request decided again because a reload
// dropped a limit its first configuration named (the backend answered
// admission.ErrUnknownLimit) is one event for the observers, the
// decision answered, not an error and then the decision.
func TestObserversOnceOnRetry(t *testing.T) {
	old, err := config.Parse("old.yaml", []byte("domain: test\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 9\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, reviewYAML, hotlimitd.Options{}) // its backend serves reviewYAML's limits only
	var outcomes []admission.Outcome
	obs := observerFunc(func(_ context.Context, ev *admission.Event) {
		outcomes = append(outcomes, ev.Result.Outcome)
	})
	calls := 0
	srv, err := hotlimitd.New(hotlimitd.Options{Backend: f.local, Observers: []admission.Observer{obs}, Config: func() *config.Config {
		calls++
		if calls == 1 {
			return old // read before the reload: its limit is gone from the backend
		}
		return f.cfg
	}})
	if err != nil {
		t.Fatal(err)
	}
	resp := ask(t, srv, request("test", desc("user", "a")))
	if resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 3 {
		t.Fatalf("response %v, want OK under the new configuration", resp)
	}
	if want := []admission.Outcome{admission.OutcomeAllowed}; !slices.Equal(outcomes, want) {
		t.Fatalf("outcomes %v, want %v", outcomes, want)
	}
}
