package hotlimitd

import (
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// FuzzLenient: whatever proto.Unmarshal reads as a RateLimitRequest,
// lenient reads the same (proto.Equal, unknown fields left out), and
// it never panics on what proto.Unmarshal refuses.
func FuzzLenient(f *testing.F) {
	for _, req := range []*rlsv3.RateLimitRequest{
		{Domain: "d", HitsAddend: 3, Descriptors: []*rlv3.RateLimitDescriptor{
			{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}, {Key: "k2"}}, HitsAddend: wrapperspb.UInt64(7), IsNegativeHits: true},
			{Limit: &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: 2}},
		}},
		{},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(append(b, b...)) // every field given twice
	}
	f.Add([]byte("\x0a\x02\xff\xfe\x12\x06\x0a\x04\x12\x02a\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var want, got rlsv3.RateLimitRequest
		werr := proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, &want) // lenient skips them
		gerr := lenient(b, &got)
		if werr == nil {
			if gerr != nil || !proto.Equal(&want, &got) {
				t.Fatalf("lenient %v, %v; proto.Unmarshal %v", &got, gerr, &want)
			}
		}
	})
}
