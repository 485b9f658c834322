package hotlimitd

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// bigRequest has more descriptors and entries than the seeds, and every
// field set: a pooled request that held it must not pass any of it on.
var bigRequest = &rlsv3.RateLimitRequest{Domain: "big", HitsAddend: 9, Descriptors: []*rlv3.RateLimitDescriptor{
	{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "b1", Value: "v1"}, {Key: "b2", Value: "v2"}, {Key: "b3", Value: "v3"}}, HitsAddend: wrapperspb.UInt64(4), IsNegativeHits: true,
		Limit: &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 8, Unit: 3, UnitMultiplier: wrapperspb.UInt32(2)}},
	{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "c1", Value: "w1"}, {Key: "c2", Value: "w2"}, {Key: "c3", Value: "w3"}, {Key: "c4", Value: "w4"}}, HitsAddend: wrapperspb.UInt64(0)},
	{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "d1", Value: "x"}}, IsNegativeHits: true},
	{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "e1", Value: "y"}}, Limit: &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: 1}},
}}

// FuzzDecodeRequest: whatever proto.Unmarshal reads as a
// RateLimitRequest, decodeRequest reads the same (proto.Equal, unknown
// fields left out), into a new request and into one that held
// bigRequest (as a pooled one does), and it never panics on what
// proto.Unmarshal refuses.
func FuzzDecodeRequest(f *testing.F) {
	for _, req := range []*rlsv3.RateLimitRequest{
		{Domain: "d", HitsAddend: 3, Descriptors: []*rlv3.RateLimitDescriptor{
			{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}, {Key: "k2"}}, HitsAddend: wrapperspb.UInt64(7), IsNegativeHits: true},
			{Limit: &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: 2}},
		}},
		{Domain: "d", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "k"}}}}},
		{Descriptors: []*rlv3.RateLimitDescriptor{{}}},
		{},
		bigRequest,
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(append(b, b...)) // every field given twice
	}
	f.Add([]byte("\x0a\x02\xff\xfe\x12\x06\x0a\x04\x12\x02a\xff"))
	big, err := proto.Marshal(bigRequest)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want rlsv3.RateLimitRequest
		werr := proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, &want) // decodeRequest skips them
		var fresh rlsv3.RateLimitRequest
		ferr := decodeRequest(string(b), &fresh)
		if werr == nil && (ferr != nil || !proto.Equal(&want, &fresh)) {
			t.Fatalf("decodeRequest %v, %v; proto.Unmarshal %v", &fresh, ferr, &want)
		}
		// Reused as the pool reuses it (its strings dropped by
		// putRequest), and straight after bigRequest.
		for _, put := range []bool{true, false} {
			reused := new(rlsv3.RateLimitRequest)
			if err := decodeRequest(string(big), reused); err != nil || !proto.Equal(reused, bigRequest) {
				t.Fatalf("bigRequest: %v, %v", reused, err)
			}
			if put {
				(&Server{}).putRequest(reused)
			}
			rerr := decodeRequest(string(b), reused)
			if werr == nil && (rerr != nil || !proto.Equal(&want, reused)) {
				t.Fatalf("decodeRequest into a reused request (put %v) %v, %v; proto.Unmarshal %v", put, reused, rerr, &want)
			}
		}
	})
}

// TestMarshalResponse: codec's Marshal writes a RateLimitResponse as
// proto.Marshal does (read back equal), into one of gRPC's pooled
// buffers: one allocation (the BufferSlice) per response, where the
// protobuf codec's new buffer costs three.
func TestMarshalResponse(t *testing.T) {
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
		Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{Name: "r", RequestsPerUnit: 10, Unit: 2}, LimitRemaining: 9, DurationUntilReset: durationpb.New(1500 * time.Millisecond)},
			{Code: rlsv3.RateLimitResponse_OVER_LIMIT, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 1, Unit: 1}},
			{Code: rlsv3.RateLimitResponse_OK},
		},
		ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "RateLimit-Policy", Value: `"r";q=10;w=60`}, {Key: "Retry-After", Value: "2"}},
	}
	for _, r := range []*rlsv3.RateLimitResponse{resp, {}, {OverallCode: rlsv3.RateLimitResponse_OK, Statuses: resp.Statuses[2:]}} {
		data, err := codec{}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got := new(rlsv3.RateLimitResponse)
		if err := proto.Unmarshal(data.Materialize(), got); err != nil || !proto.Equal(got, r) {
			t.Fatalf("Marshal(%v) read back as %v, %v", r, got, err)
		}
		data.Free()
	}
	if raceOn {
		return // the race detector allocates
	}
	if n := testing.AllocsPerRun(100, func() {
		data, err := codec{}.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		data.Free()
	}); n > 1 {
		t.Fatalf("%v allocations per response, want 1", n)
	}
}
