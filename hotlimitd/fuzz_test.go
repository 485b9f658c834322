package hotlimitd_test

import (
	"math"
	"strings"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/internal/sfv"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// FuzzShouldRateLimit decodes bytes into a stream of requests against
// testYAML, all in one minute of a frozen clock, and checks every
// response against a model of its fixed windows: the invariants of
// checkInvariants; a request is refused exactly when the units its
// enforced descriptors ask of some key (summed over the descriptors that
// share it) exceed what the key has left; a refused request consumes
// nothing; each descriptor with a limit reports what its key has left
// after the decision; a descriptor whose key is asked more than that
// (its own cost and those of the request's other descriptors of the
// key) is OVER_LIMIT, and only such a descriptor is; shadow
// descriptors are OK, each decided on its own, and only for an admitted
// request.
//
// Layout: each request takes bytes [flags, hits, n, then per descriptor
// d0, d1, d2]: flags&3 picks the domain ("test", "other", "", "test"),
// hits is the request's hits_addend (0 to 255), n&7 descriptors (0 to
// 7); per descriptor d0 picks the entries (d0&7 of descKeys with
// descValues[d0>>3&3], 0 entries for 7), d1 its hits_addend (unset below
// 128, d1&15 else, and 1<<63 for d1 = 255), d2&1 is_negative_hits.
// testdata/fuzz/FuzzShouldRateLimit holds the corpus of earlier runs
// (go test -fuzz FuzzShouldRateLimit), which every test run replays.
func FuzzShouldRateLimit(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 0, 0})                                     // one user descriptor
	f.Add([]byte{0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0}) // user + path, twice
	f.Add([]byte{0, 2, 3, 0, 0, 0, 0, 0, 0, 3, 0, 0})                   // user twice in one request, hits 2
	f.Add([]byte{0, 0, 2, 5, 0, 0, 0, 255, 0})                          // shadow + a huge cost
	f.Add([]byte{1, 0, 1, 0, 0, 0, 2, 0, 0})                            // unknown domain, no domain
	f.Add([]byte{0, 0, 3, 4, 0, 0, 6, 0, 0, 7, 0, 0})                   // unmatched, nested, empty
	f.Add([]byte{0, 0, 2, 0, 130, 1, 1, 140, 0})                        // a negative-hits peek
	f.Add([]byte{0, 2, 2, 0, 128, 0, 0, 0, 0})                          // a descriptor's hits_addend 0: a check
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 600 {
			return
		}
		fx := newFixture(t, testYAML, hotlimitd.Options{Headers: true})
		m := newModel()
		for len(data) >= 3 {
			flags, hits, n := data[0], data[1], int(data[2]&7)
			data = data[3:]
			req := &rlsv3.RateLimitRequest{Domain: []string{"test", "other", "", "test"}[flags&3], HitsAddend: uint32(hits)}
			for ; n > 0 && len(data) >= 3; n-- {
				req.Descriptors = append(req.Descriptors, fuzzDesc(data[0], data[1], data[2]))
				data = data[3:]
			}
			resp, err := fx.srv.ShouldRateLimit(t.Context(), req)
			if req.Domain == "" || len(req.Descriptors) == 0 {
				if err == nil {
					t.Fatalf("%v: no error", req)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%v: %v", req, err)
			}
			checkInvariants(t, req, resp)
			m.check(t, req, resp)
			checkHeaders(t, req, resp)
		}
	})
}

var (
	descKeys   = []string{"user", "path", "internal", "preview", "nope", "preview", "user"}
	descValues = []string{"ann", "/a", "x", ""}
)

func fuzzDesc(d0, d1, d2 byte) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	if k := int(d0 & 7); k < len(descKeys) {
		d.Entries = []*rlv3.RateLimitDescriptor_Entry{{Key: descKeys[k], Value: descValues[d0>>3&3]}}
		if k == 6 { // nested: two entries, matched by no rule
			d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: "user", Value: "ann"})
		}
	}
	switch {
	case d1 == 255:
		d.HitsAddend = wrapperspb.UInt64(1 << 63)
	case d1 >= 128:
		d.HitsAddend = wrapperspb.UInt64(uint64(d1 & 15))
	}
	d.IsNegativeHits = d2&1 == 1
	return d
}

// model is testYAML's limits as plain counters of one minute.
type model struct {
	used map[string]int64 // by rule and entries
}

func newModel() *model { return &model{used: map[string]int64{}} }

// rule returns descriptor d's rule in testYAML: its name in the model,
// its limit (0 for none: unmatched or unlimited) and whether it is
// shadow.
func rule(domain string, d *rlv3.RateLimitDescriptor) (key string, limit int64, shadow bool) {
	if domain != "test" || len(d.Entries) != 1 {
		return "", 0, false
	}
	e := d.Entries[0]
	key = e.Key + "\x00" + e.Value
	switch {
	case e.Key == "user":
		return key, 3, false
	case e.Key == "path" && e.Value == "/a":
		return key, 2, false
	case e.Key == "preview":
		return key, 1, true
	}
	return "", 0, false
}

// cost is d's cost under a request of hits.
func cost(d *rlv3.RateLimitDescriptor, reqHits uint32) int64 {
	h := max(1, uint64(reqHits)) // the request's 0 is 1
	if d.HitsAddend != nil {
		h = d.HitsAddend.Value // a descriptor's own, 0 included
	}
	if d.IsNegativeHits {
		return 0
	}
	return int64(min(h, math.MaxInt64))
}

func (m *model) check(t *testing.T, req *rlsv3.RateLimitRequest, resp *rlsv3.RateLimitResponse) {
	t.Helper()
	ask := map[string]int64{}
	limits := map[string]int64{}
	for _, d := range req.Descriptors {
		if k, l, shadow := rule(req.Domain, d); l > 0 && !shadow {
			ask[k] = satAdd(ask[k], cost(d, req.HitsAddend))
			limits[k] = l
		}
	}
	admit := true
	for k, c := range ask {
		if c > limits[k]-m.used[k] { // no overflow: c may be the largest int64
			admit = false
		}
	}
	if admit {
		for k, c := range ask {
			m.used[k] += c
		}
	}
	if got := resp.OverallCode == rlsv3.RateLimitResponse_OK; got != admit {
		t.Fatalf("%v: admitted %v, model %v (used %v)", req, got, admit, m.used)
	}
	for i, d := range req.Descriptors {
		st := resp.Statuses[i]
		k, l, shadow := rule(req.Domain, d)
		if l == 0 {
			if st.CurrentLimit != nil || st.Code != rlsv3.RateLimitResponse_OK {
				t.Fatalf("%v: status %d %v, want OK without a limit", req, i, st)
			}
			continue
		}
		c := cost(d, req.HitsAddend)
		if shadow {
			if admit && c <= l-m.used[k] {
				m.used[k] += c
			}
			if st.Code != rlsv3.RateLimitResponse_OK {
				t.Fatalf("%v: shadow status %d %v", req, i, st)
			}
		}
		left := l - m.used[k]
		if st.CurrentLimit == nil || int64(st.LimitRemaining) != left {
			t.Fatalf("%v: status %d %v, want %d remaining (used %v)", req, i, st, left, m.used)
		}
		over := st.Code == rlsv3.RateLimitResponse_OVER_LIMIT
		if !shadow && !admit && ask[k] > left && !over {
			t.Fatalf("%v: status %d's key is asked %d with %d left, not OVER_LIMIT", req, i, ask[k], left)
		}
		if over && left >= ask[k] {
			t.Fatalf("%v: status %d OVER_LIMIT, but its key had room for %d", req, i, ask[k])
		}
	}
}

// checkHeaders checks the RateLimit field: a valid List with one item
// per enforced descriptor, in order, each r its status's limit_remaining,
// and RateLimit-Policy's item of the same descriptor with the same name
// and pk; two items have the same name and pk exactly when their
// descriptors share a limit and a key. No fields when no descriptor is
// enforced.
func checkHeaders(t *testing.T, req *rlsv3.RateLimitRequest, resp *rlsv3.RateLimitResponse) {
	t.Helper()
	var (
		want []int64
		keys []string // the model's limit and key of each item
	)
	for i, d := range req.Descriptors {
		if key, l, shadow := rule(req.Domain, d); l > 0 && !shadow {
			want = append(want, int64(resp.Statuses[i].LimitRemaining))
			keys = append(keys, key)
		}
	}
	h := headers(resp)
	if len(want) == 0 {
		if len(h) != 0 {
			t.Fatalf("%v: headers %v without an enforced descriptor", req, h)
		}
		return
	}
	items, err := sfv.ParseList(h["RateLimit"])
	if err != nil || len(items) != len(want) {
		t.Fatalf("%v: RateLimit %q: %v, want %d items", req, h["RateLimit"], err, len(want))
	}
	for i, it := range items {
		if r, _ := it.Params.Get("r"); r.Int != want[i] {
			t.Fatalf("%v: RateLimit item %d has r=%d, want %d", req, i, r.Int, want[i])
		}
	}
	policy, err := sfv.ParseList(h["RateLimit-Policy"])
	if err != nil || len(policy) != len(items) {
		t.Fatalf("%v: RateLimit-Policy %q: %v, want %d items", req, h["RateLimit-Policy"], err, len(items))
	}
	id := func(m sfv.Member) string {
		pk, ok := m.Params.Get("pk")
		if !ok || pk.Kind != sfv.ByteSequence {
			t.Fatalf("%v: item %q without a Byte Sequence pk", req, m.Value.Str)
		}
		return m.Value.Str + "\x00" + pk.Str
	}
	for i := range items {
		if id(items[i]) != id(policy[i]) {
			t.Fatalf("%v: item %d: RateLimit %q, RateLimit-Policy %q: not one name and pk", req, i, h["RateLimit"], h["RateLimit-Policy"])
		}
		for k := range i {
			if (id(items[i]) == id(items[k])) != (keys[i] == keys[k]) {
				t.Fatalf("%v: items %d and %d of %q: same name and pk %v, same limit and key %v", req, k, i, h["RateLimit"], id(items[i]) == id(items[k]), keys[i] == keys[k])
			}
		}
	}
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// TestFuzzSeedsCover: the fuzz seeds reach every kind of answer (a guard
// against a layout change that leaves the seeds testing nothing).
func TestFuzzSeedsCover(t *testing.T) {
	fx := newFixture(t, testYAML, hotlimitd.Options{})
	var seen strings.Builder
	for _, b := range [][3]byte{{0, 0, 0}, {3, 0, 0}, {2, 0, 0}, {4, 0, 0}} {
		resp := ask(t, fx.srv, request("test", fuzzDesc(b[0], b[1], b[2])))
		seen.WriteString(codesOf(resp))
		seen.WriteByte(' ')
	}
	if got := seen.String(); got != "OK OK OK OK " {
		t.Fatalf("codes %q", got)
	}
}
