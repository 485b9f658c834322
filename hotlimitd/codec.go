package hotlimitd

import (
	"errors"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ServerOption is the gRPC server option a server of ShouldRateLimit
// needs: it reads a RateLimitRequest whose strings are not UTF-8, which
// gRPC's protobuf codec refuses (codes.Internal). Envoy sends a header's
// bytes as they came (an HTTP header may hold any byte from 0x80 up), and
// Envoy lets a request whose rate limit call failed through (unless
// failure_mode_deny), so without it a client bypasses every limit on a
// header by adding such a byte. The strings are kept byte for byte: a
// descriptor value matches, and counts, as the bytes it has. Every other
// message is the protobuf codec's.
func ServerOption() grpc.ServerOption { return grpc.ForceServerCodecV2(codec{}) }

// codec is gRPC's protobuf codec, which reads a RateLimitRequest that
// proto.Unmarshal refuses by reading its fields without validating
// UTF-8.
type codec struct{}

var protoCodec = encoding.GetCodecV2("proto")

func (codec) Name() string { return protoCodec.Name() }

func (codec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := protoCodec.Unmarshal(data, v)
	req, ok := v.(*rlsv3.RateLimitRequest)
	if err == nil || !ok {
		return err
	}
	b := data.Materialize()
	proto.Reset(req)
	if lenient(b, req) != nil {
		return err // malformed, not only a string that is not UTF-8
	}
	return nil
}

var errWire = errors.New("hotlimitd: malformed RateLimitRequest")

// merge reads a message field given again into what was read, as
// proto.Unmarshal does, leaving unknown fields out as lenient does.
var merge = proto.UnmarshalOptions{Merge: true, DiscardUnknown: true}

// fields calls f with each field of the message b, and fails on a
// malformed one.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errWire
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errWire
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// lenient reads b into req as proto.Unmarshal does, but takes strings as
// they are. Unknown fields, and known ones of another wire type (as
// protobuf reads them), are skipped.
func lenient(b []byte, req *rlsv3.RateLimitRequest) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			req.Domain = string(v)
		case num == 2 && typ == protowire.BytesType:
			d := new(rlv3.RateLimitDescriptor)
			if err := lenientDescriptor(v, d); err != nil {
				return err
			}
			req.Descriptors = append(req.Descriptors, d)
		case num == 3 && typ == protowire.VarintType:
			req.HitsAddend = uint32(x)
		}
		return nil
	})
}

func lenientDescriptor(b []byte, d *rlv3.RateLimitDescriptor) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			e := new(rlv3.RateLimitDescriptor_Entry)
			err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					e.Key = string(v)
				case num == 2 && typ == protowire.BytesType:
					e.Value = string(v)
				}
				return nil
			})
			if err != nil {
				return err
			}
			d.Entries = append(d.Entries, e)
		case num == 2 && typ == protowire.BytesType:
			if d.Limit == nil {
				d.Limit = new(rlv3.RateLimitDescriptor_RateLimitOverride)
			}
			return merge.Unmarshal(v, d.Limit) // it has no strings
		case num == 3 && typ == protowire.BytesType:
			if d.HitsAddend == nil {
				d.HitsAddend = new(wrapperspb.UInt64Value)
			}
			return merge.Unmarshal(v, d.HitsAddend)
		case num == 4 && typ == protowire.VarintType:
			d.IsNegativeHits = x != 0
		}
		return nil
	})
}
