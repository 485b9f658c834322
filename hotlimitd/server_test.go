package hotlimitd_test

import (
	"context"
	"encoding/base64"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"github.com/hotlimit/hotlimit/internal/sfv"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const testYAML = `domain: test
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 3
  - key: path
    value: /a
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: internal
    rate_limit:
      unlimited: true
  - key: preview
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
`

// TestStatuses: each descriptor's status comes from its own limit: a
// fixed window of 3 a minute counts down, refuses the 4th, and tells the
// time to the window's end; unlimited and unmatched descriptors are OK
// without a limit.
func TestStatuses(t *testing.T) {
	f := newFixture(t, testYAML, hotlimitd.Options{})
	f.clock.Set(15 * time.Second)
	for i, want := range []int64{2, 1, 0} {
		resp := ask(t, f.srv, request("test", desc("user", "ann"), desc("internal", "x"), desc("nope", "x")))
		if got := codesOf(resp); got != "OK OK OK" {
			t.Fatalf("request %d: codes %s", i, got)
		}
		if got := remaining(resp); got[0] != want || got[2] != -1 {
			t.Fatalf("request %d: remaining %v, want %d for user, none for the unmatched", i, got, want)
		}
		st := resp.Statuses[0]
		if st.CurrentLimit.RequestsPerUnit != 3 || st.CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE || st.CurrentLimit.Name != "" {
			t.Fatalf("current_limit %v", st.CurrentLimit)
		}
		if got := seconds(resp, 0); got != 45*time.Second {
			t.Fatalf("duration_until_reset %v, want 45s (to the minute's end)", got)
		}
		if u := resp.Statuses[1]; u.CurrentLimit != nil || u.LimitRemaining != math.MaxUint32 {
			t.Fatalf("unlimited status %v", u)
		}
	}
	resp := ask(t, f.srv, request("test", desc("user", "ann")))
	if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || remaining(resp)[0] != 0 || seconds(resp, 0) != 45*time.Second {
		t.Fatalf("4th request: %v", resp)
	}
	// Another user has a key of its own.
	if resp := ask(t, f.srv, request("test", desc("user", "bob"))); remaining(resp)[0] != 2 {
		t.Fatalf("bob: %v", resp)
	}
	f.clock.Set(time.Minute)
	if resp := ask(t, f.srv, request("test", desc("user", "ann"))); resp.OverallCode != rlsv3.RateLimitResponse_OK || remaining(resp)[0] != 2 {
		t.Fatalf("next minute: %v", resp)
	}
	// An unknown domain limits nothing.
	if resp := ask(t, f.srv, request("other", desc("user", "ann"))); remaining(resp)[0] != -1 {
		t.Fatalf("unknown domain: %v", resp)
	}
}

// TestAllOrNothing: a request refused by one descriptor consumes nothing
// in the others, and only the descriptor that refused it is OVER_LIMIT.
func TestAllOrNothing(t *testing.T) {
	f := newFixture(t, testYAML, hotlimitd.Options{})
	for range 2 {
		ask(t, f.srv, request("test", desc("path", "/a")))
	}
	for range 3 {
		resp := ask(t, f.srv, request("test", desc("user", "ann"), desc("path", "/a")))
		if got := codesOf(resp); got != "OK OVER_LIMIT" {
			t.Fatalf("codes %s, want OK OVER_LIMIT", got)
		}
		if got := remaining(resp); !slices.Equal(got, []int64{3, 0}) {
			t.Fatalf("remaining %v, want [3 0]: the refused request took nothing from user", got)
		}
	}
	if got := remaining(ask(t, f.srv, request("test", desc("user", "ann")))); got[0] != 2 {
		t.Fatalf("user after refusals: remaining %v, want 2", got)
	}
}

// TestHitsAddend: the request's hits_addend is each descriptor's cost
// unless the descriptor sets its own; a request's 0 (or unset) means 1; a
// cost beyond any capacity refuses without consuming, never wraps around.
func TestHitsAddend(t *testing.T) {
	f := newFixture(t, testYAML, hotlimitd.Options{})
	req := request("test", desc("user", "ann"), withHits(desc("user", "bob"), 1))
	req.HitsAddend = 2
	if got := remaining(ask(t, f.srv, req)); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("remaining %v, want [1 2]", got)
	}
	req = request("test", desc("user", "bob"))
	req.HitsAddend = 0
	if got := remaining(ask(t, f.srv, req)); got[0] != 1 {
		t.Fatalf("request hits_addend 0: remaining %v, want 1 (a request's 0 means 1)", got)
	}
	for _, hits := range []uint64{4, 1 << 63, math.MaxUint64} {
		resp := ask(t, f.srv, request("test", withHits(desc("user", "cat"), hits)))
		if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || remaining(resp)[0] != 3 {
			t.Fatalf("hits %d: %v, want OVER_LIMIT with 3 remaining", hits, resp)
		}
	}
}

// TestDescriptorHitsAddendZero: a descriptor's own hits_addend set to 0
// overrides the request's and checks without consuming (as the proto has
// it, and envoyproxy/ratelimit answers): the repro, user 3 a
// minute here, answers 3 left, not 2; and on a spent limit it is OK with
// 0 left, while a request of one hit is refused. A rule that refuses
// every hit refuses it.
func TestDescriptorHitsAddendZero(t *testing.T) {
	f := newFixture(t, testYAML, hotlimitd.Options{})
	for _, reqHits := range []uint32{0, 1, 2} {
		req := request("test", withHits(desc("user", "bob"), 0))
		req.HitsAddend = reqHits
		resp := ask(t, f.srv, req)
		if resp.OverallCode != rlsv3.RateLimitResponse_OK || remaining(resp)[0] != 3 {
			t.Fatalf("request hits %d, descriptor hits 0: %v, want OK with 3 remaining (a check)", reqHits, resp)
		}
	}
	req := request("test", desc("user", "bob"))
	req.HitsAddend = 3
	if got := remaining(ask(t, f.srv, req)); got[0] != 0 {
		t.Fatalf("3 hits: remaining %v, want 0", got)
	}
	resp := ask(t, f.srv, request("test", withHits(desc("user", "bob"), 0), desc("path", "/a")))
	if got := codesOf(resp); got != "OK OK" || !slices.Equal(remaining(resp), []int64{0, 1}) {
		t.Fatalf("a check on a spent limit beside another: %v, want OK OK with [0 1] remaining", resp)
	}
	if resp := ask(t, f.srv, request("test", desc("user", "bob"))); resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("a hit on the spent limit: %v, want OVER_LIMIT", resp)
	}
	// On a rule that refuses every hit, a check is OK with nothing left,
	// as envoyproxy/ratelimit answers it (0 hits are not over 0), and
	// refuses nothing beside it; a negative-hits peek of 1 hit, which
	// envoyproxy/ratelimit consumes, is refused.
	r := newFixture(t, reviewYAML, hotlimitd.Options{})
	resp = ask(t, r.srv, request("test", withHits(desc("block", "x"), 0)))
	if codesOf(resp) != "OK" || resp.Statuses[0].CurrentLimit == nil || resp.Statuses[0].LimitRemaining != 0 || resp.Statuses[0].DurationUntilReset != nil {
		t.Fatalf("a check on a rule of requests_per_unit 0: %v, want OK, its limit, 0 remaining, no duration_until_reset", resp)
	}
	resp = ask(t, r.srv, request("test", withHits(desc("block", "x"), 0), desc("user", "ann")))
	if codesOf(resp) != "OK OK" || !slices.Equal(remaining(resp), []int64{0, 2}) {
		t.Fatalf("a check on a rule of requests_per_unit 0 beside a hit: %v, want OK OK with [0 2] remaining", resp)
	}
	peek := desc("block", "x") // the request's 1 hit
	peek.IsNegativeHits = true
	if resp := ask(t, r.srv, request("test", peek)); codesOf(resp) != "OVER_LIMIT" {
		t.Fatalf("a negative-hits peek on a rule of requests_per_unit 0: %v, want OVER_LIMIT", resp)
	}
}

// TestShadow: a shadow-mode descriptor over its limit is reported OK,
// never refuses the request, and is counted; it does not count requests
// the enforced descriptors refused.
func TestShadow(t *testing.T) {
	f := newFixture(t, testYAML, hotlimitd.Options{})
	resp := ask(t, f.srv, request("test", desc("preview", "x")))
	if got := remaining(resp); got[0] != 0 {
		t.Fatalf("remaining %v, want 0", got)
	}
	for range 2 {
		resp = ask(t, f.srv, request("test", desc("preview", "x"), desc("user", "ann")))
		if got := codesOf(resp); got != "OK OK" {
			t.Fatalf("codes %s", got)
		}
	}
	if got := f.srv.Stats().ShadowOverLimit; got != 2 {
		t.Fatalf("ShadowOverLimit %d, want 2", got)
	}
	// A request refused by an enforced descriptor: the shadow one of a
	// fresh key is only read.
	ask(t, f.srv, request("test", desc("user", "ann")))
	resp = ask(t, f.srv, request("test", desc("preview", "y"), desc("user", "ann")))
	if got := codesOf(resp); got != "OK OVER_LIMIT" {
		t.Fatalf("codes %s", got)
	}
	if got := remaining(resp); got[0] != 1 {
		t.Fatalf("preview y in a refused request: remaining %v, want 1 (only read)", got)
	}
	if got := remaining(ask(t, f.srv, request("test", desc("preview", "y")))); got[0] != 0 || f.srv.Stats().ShadowOverLimit != 2 {
		t.Fatalf("preview y after a refused request: remaining %v, ShadowOverLimit %d, want 0 and 2 (its first admission now)", got, f.srv.Stats().ShadowOverLimit)
	}

	// On a shadow rule that refuses every hit, a check (0 hits) is no
	// would-be refusal, as envoyproxy/ratelimit counts it (0 hits are
	// not over 0); 1 hit is one.
	b := newFixture(t, `domain: test
descriptors:
  - key: preview
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1}
`, hotlimitd.Options{})
	resp = ask(t, b.srv, request("test", withHits(desc("preview", "x"), 0)))
	if codesOf(resp) != "OK" || resp.Statuses[0].CurrentLimit == nil || resp.Statuses[0].LimitRemaining != 0 || b.srv.Stats().ShadowOverLimit != 0 {
		t.Fatalf("a check on a shadow rule of requests_per_unit 0: %v, ShadowOverLimit %d, want OK, its limit, 0 remaining, and 0", resp, b.srv.Stats().ShadowOverLimit)
	}
	resp = ask(t, b.srv, request("test", desc("preview", "x")))
	if codesOf(resp) != "OK" || b.srv.Stats().ShadowOverLimit != 1 {
		t.Fatalf("a hit on a shadow rule of requests_per_unit 0: %v, ShadowOverLimit %d, want OK and 1", resp, b.srv.Stats().ShadowOverLimit)
	}
}

// TestInvalid: a request without a domain, without descriptors or with
// too many is refused with InvalidArgument; empty and nil parts are not
// limited.
func TestInvalid(t *testing.T) {
	f := newFixture(t, testYAML, hotlimitd.Options{})
	many := request("test")
	for range hotlimitd.MaxDescriptors + 1 {
		many.Descriptors = append(many.Descriptors, desc("user", "ann"))
	}
	for _, req := range []*rlsv3.RateLimitRequest{nil, request(""), request("test"), many} {
		_, err := f.srv.ShouldRateLimit(context.Background(), req)
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%v: error %v, want InvalidArgument", req, err)
		}
	}
	nilEntry := desc("user", "ann")
	nilEntry.Entries = append(nilEntry.Entries, nil)
	resp := ask(t, f.srv, request("test", nil, desc(), nilEntry))
	if got := remaining(resp); !slices.Equal(got, []int64{-1, -1, -1}) {
		t.Fatalf("remaining %v", got)
	}
	if got := f.srv.Stats().Invalid; got != 4 {
		t.Fatalf("Stats.Invalid %d, want 4", got)
	}
}

// TestBackendError: a backend that cannot decide fails the RPC with
// Unavailable, or, with FailOpen, answers OK without limits.
func TestBackendError(t *testing.T) {
	f := newFixture(t, testYAML, hotlimitd.Options{Backend: failing{}})
	_, err := f.srv.ShouldRateLimit(context.Background(), request("test", desc("user", "ann")))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("error %v, want Unavailable", err)
	}
	// Nothing is asked of the backend for descriptors without a limit.
	ask(t, f.srv, request("test", desc("internal", "x")))
	open := newFixture(t, testYAML, hotlimitd.Options{Backend: failing{}, FailOpen: true})
	resp := ask(t, open.srv, request("test", desc("user", "ann"), desc("path", "/a")))
	if got := remaining(resp); got[0] != -1 || got[1] != -1 || resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("fail open: %v", resp)
	}
	if st := f.srv.Stats(); st.FailedClosed != 1 {
		t.Fatalf("Stats %+v", st)
	}
	if st := open.srv.Stats(); st.FailedOpen != 1 {
		t.Fatalf("Stats %+v", st)
	}
}

// TestHeaders: RateLimit-Policy and RateLimit describe each enforced
// descriptor from the decision; Retry-After is the refusal's wait.
func TestHeaders(t *testing.T) {
	f := newFixture(t, testYAML, hotlimitd.Options{Headers: true})
	f.clock.Set(50 * time.Second)
	req := request("test", desc("user", "ann"), desc("path", "/a"), desc("preview", "p"))
	resp := ask(t, f.srv, req)
	h := headers(resp)
	user, path := limitName(t, f.cfg, "test", "user", "ann"), limitName(t, f.cfg, "test", "path", "/a")
	wantPolicy := `"` + user + `";q=3;w=60, "` + path + `";q=2;w=60`
	wantRL := `"` + user + `";r=2;t=10, "` + path + `";r=1;t=10`
	if withoutPK(h["RateLimit-Policy"]) != wantPolicy || withoutPK(h["RateLimit"]) != wantRL || h["Retry-After"] != "" {
		t.Fatalf("headers %v, want policy %s and %s (pk aside)", h, wantPolicy, wantRL)
	}
	ask(t, f.srv, req)
	h = headers(ask(t, f.srv, req))
	if withoutPK(h["RateLimit"]) != `"`+user+`";r=1;t=10, "`+path+`";r=0;t=10` || h["Retry-After"] != "10" {
		t.Fatalf("refused: headers %v", h)
	}
	if h := headers(ask(t, f.srv, request("test", desc("internal", "x")))); len(h) != 0 {
		t.Fatalf("no enforced limit: headers %v", h)
	}
}

// withoutPK returns a RateLimit or RateLimit-Policy field without its
// items' pk parameters (TestHeadersPartitionKey checks those).
func withoutPK(field string) string { return pkParam.ReplaceAllString(field, "") }

var pkParam = regexp.MustCompile(`;pk=:[A-Za-z0-9+/=]*:`)

func headers(resp *rlsv3.RateLimitResponse) map[string]string {
	m := map[string]string{}
	for _, h := range resp.ResponseHeadersToAdd {
		m[h.Key] = h.Value
	}
	return m
}

// TestReloadRace: a request whose configuration was replaced before the
// backend decided (the backend already serving the new limits) is
// decided again under the new configuration, not failed.
func TestReloadRace(t *testing.T) {
	oldCfg, err := config.Parse("old.yaml", []byte(testYAML))
	if err != nil {
		t.Fatal(err)
	}
	newCfg, err := config.Parse("new.yaml", []byte("domain: test\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: minute\n      requests_per_unit: 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	local, err := admission.LocalBackend(hotlimit.WithSweepInterval(0))(newCfg.Limits())
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	calls := 0
	s, err := hotlimitd.New(hotlimitd.Options{Backend: local, Config: func() *config.Config {
		calls++
		if calls == 1 {
			return oldCfg
		}
		return newCfg
	}})
	if err != nil {
		t.Fatal(err)
	}
	resp := ask(t, s, request("test", desc("user", "ann")))
	if got := resp.Statuses[0].CurrentLimit.GetRequestsPerUnit(); got != 7 || remaining(resp)[0] != 6 {
		t.Fatalf("%v, want the new limit of 7", resp)
	}
}

// TestObservers: an observer sees each enforced decision, with the
// binding descriptor's limit and the request's domain.
func TestObservers(t *testing.T) {
	var seen []admission.Event
	obs := observerFunc(func(_ context.Context, ev *admission.Event) {
		e := *ev
		e.Result = nil
		e.Duration = 0
		e.Group += ":" + ev.Result.Outcome.String()
		seen = append(seen, e)
	})
	f := newFixture(t, testYAML, hotlimitd.Options{Observers: []admission.Observer{obs}})
	ask(t, f.srv, request("test", desc("path", "/a")))
	ask(t, f.srv, request("test", desc("internal", "x")))
	ask(t, f.srv, request("test", desc("path", "/a")))
	ask(t, f.srv, request("test", desc("user", "x"), desc("path", "/a")))
	path := limitName(t, f.cfg, "test", "path", "/a")
	want := []admission.Event{
		{Group: "test:allowed", GroupLimit: path, GroupAlgorithm: "FixedWindow"},
		{Group: "test:allowed", GroupLimit: path, GroupAlgorithm: "FixedWindow"},
		{Group: "test:denied", GroupLimit: path, GroupAlgorithm: "FixedWindow"},
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("events %+v, want %+v", seen, want)
	}
}

type observerFunc func(context.Context, *admission.Event)

func (f observerFunc) Begin(ctx context.Context, _ *admission.Event) context.Context { return ctx }

func (f observerFunc) Observe(ctx context.Context, ev *admission.Event) { f(ctx, ev) }

// TestHeadersParse: the headers are valid RFC 9651 Lists (read with the
// strict parser httpretry uses) even when a limit's name holds '"' and
// '\' (a rule value may), and each item names its limit.
func TestHeadersParse(t *testing.T) {
	f := newFixture(t, `domain: q
descriptors:
  - key: k
    value: 'a"b\c'
    rate_limit:
      unit: second
      requests_per_unit: 5
  - key: plain
    rate_limit:
      unit: hour
      requests_per_unit: 7
`, hotlimitd.Options{Headers: true})
	resp := ask(t, f.srv, request("q", desc("k", `a"b\c`), desc("plain", "x")))
	names := []string{limitName(t, f.cfg, "q", "k", `a"b\c`), limitName(t, f.cfg, "q", "plain", "x")}
	h := headers(resp)
	for _, field := range []string{"RateLimit-Policy", "RateLimit"} {
		items, err := sfv.ParseList(h[field])
		if err != nil || len(items) != 2 {
			t.Fatalf("%s %q: %v, %d items", field, h[field], err, len(items))
		}
		for i, it := range items {
			if want := names[i]; it.Value.Str != want {
				t.Errorf("%s item %d names %q, want %q", field, i, it.Value.Str, want)
			}
		}
	}
}

// TestHeadersPartitionKey: two descriptors of one limit with different
// values are two partitions of it, told apart by the pk parameter of
// their items (draft-11 names an item after its policy, so both items
// have the limit's name). A client that keeps one item per (name, pk)
// reads each partition's own r, its pk pairs the RateLimit item with
// its RateLimit-Policy item, a partition keeps its pk from one response
// to the next, and the fields hold no descriptor value.
func TestHeadersPartitionKey(t *testing.T) {
	f := newFixture(t, testYAML, hotlimitd.Options{Headers: true})
	const a, b = "alice-7f3e", "bob-91c2" // "user" is a key-only rule: 3 a minute per value
	ask(t, f.srv, request("test", desc("user", a)))
	h := headers(ask(t, f.srv, request("test", desc("user", a), desc("user", b))))
	name := limitName(t, f.cfg, "test", "user", a)
	parse := func(field string) map[string]int64 { // pk → r (or q): a client's reading
		t.Helper()
		items, err := sfv.ParseList(h[field])
		if err != nil || len(items) != 2 {
			t.Fatalf("%s %q: %v, %d items", field, h[field], err, len(items))
		}
		byPK := map[string]int64{}
		for _, it := range items {
			pk, ok := it.Params.Get("pk")
			if it.Value.Str != name || !ok || pk.Kind != sfv.ByteSequence {
				t.Fatalf("%s %q: want items named %q with a Byte Sequence pk", field, h[field], name)
			}
			v, _ := it.Params.Get("r")
			if field == "RateLimit-Policy" {
				v, _ = it.Params.Get("q")
			}
			byPK[pk.Str] = v.Int
		}
		return byPK
	}
	rl, policy := parse("RateLimit"), parse("RateLimit-Policy")
	if len(rl) != 2 {
		t.Fatalf("RateLimit %q: %d partitions, want 2 (one item lost to a shared name and pk)", h["RateLimit"], len(rl))
	}
	var pkA, pkB string
	for pk, r := range rl {
		switch r {
		case 1: // a: spent twice
			pkA = pk
		case 2: // b: spent once
			pkB = pk
		}
		if q, ok := policy[pk]; !ok || q != 3 {
			t.Fatalf("RateLimit item pk=%s has no RateLimit-Policy item of q=3: %q", pk, h["RateLimit-Policy"])
		}
	}
	if pkA == "" || pkB == "" {
		t.Fatalf("RateLimit %q: want r=1 (a) and r=2 (b)", h["RateLimit"])
	}
	if h := headers(ask(t, f.srv, request("test", desc("user", a)))); !strings.Contains(h["RateLimit"], ";r=0;t=60;pk=:"+pkA+":") {
		t.Fatalf("a's next item %q, want r=0 under the same pk %s", h["RateLimit"], pkA)
	}
	for _, v := range []string{h["RateLimit"], h["RateLimit-Policy"]} {
		for _, pk := range []string{pkA, pkB} {
			raw, err := base64.StdEncoding.DecodeString(pk)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(raw), "alice") || strings.Contains(string(raw), "bob") {
				t.Fatalf("pk %s holds a descriptor value", pk)
			}
		}
		if strings.Contains(v, "alice") || strings.Contains(v, "bob") || strings.Contains(v, base64.StdEncoding.EncodeToString([]byte(a))[:8]) {
			t.Fatalf("field %q holds a descriptor value", v)
		}
	}
}

// TestPartitionKeySecret: Servers given one PartitionKeySecret (replicas)
// give a key one pk; without one (nil or empty), each Server has its own.
func TestPartitionKeySecret(t *testing.T) {
	pk := func(secret []byte) string {
		f := newFixture(t, testYAML, hotlimitd.Options{Headers: true, PartitionKeySecret: secret})
		items, err := sfv.ParseList(headers(ask(t, f.srv, request("test", desc("user", "ann"))))["RateLimit"])
		if err != nil || len(items) != 1 {
			t.Fatalf("RateLimit: %v, %d items", err, len(items))
		}
		v, _ := items[0].Params.Get("pk")
		return v.Str
	}
	if a, b := pk([]byte("shared")), pk([]byte("shared")); a != b || a == "" {
		t.Fatalf("one secret: pk %q and %q, want one", a, b)
	}
	if a, b := pk([]byte("shared")), pk([]byte("other")); a == b {
		t.Fatalf("two secrets: pk %q both", a)
	}
	for _, none := range [][]byte{nil, {}} { // an empty secret is none: everyone knows it
		if a, b := pk(none), pk(none); a == b {
			t.Fatalf("secret %q: two Servers share pk %q", none, a)
		}
	}
}

// TestHugeDescriptor: a descriptor of 100,000 entries (within gRPC's
// message size) matches nothing and is answered OK, as often as asked.
func TestHugeDescriptor(t *testing.T) {
	f := newFixture(t, testYAML, hotlimitd.Options{})
	kv := make([]string, 0, 200_000)
	for range 100_000 {
		kv = append(kv, "user", "ann")
	}
	for i := range int64(3) {
		resp := ask(t, f.srv, request("test", desc(kv...), desc("user", "ann")))
		if got := remaining(resp); !slices.Equal(got, []int64{-1, 2 - i}) {
			t.Fatalf("request %d: remaining %v, want [-1 %d]", i, got, 2-i)
		}
	}
}
