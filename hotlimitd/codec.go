package hotlimitd

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"unsafe"

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

// codec is gRPC's protobuf codec, but that it reads a RateLimitRequest
// itself (decodeRequest): without protobuf's reflection, and without
// validating its strings as UTF-8, which proto.Unmarshal does and fails
// on. None of the request's strings needs to be UTF-8 here: a descriptor's
// keys and values are only matched against the configuration's (which a
// string that is not UTF-8 matches only by a key-only rule, as its bytes)
// and written into the limits' keys as bytes; none goes into a message or
// a header of the response (which carry the configuration's names), a
// log line, a metric or a span. The domain goes into a span's attribute
// as it came (as it did when proto.Unmarshal's refusal was retried
// leniently), and to the observers only when the configuration has it.
type codec struct{}

var protoCodec = encoding.GetCodecV2("proto")

func (codec) Name() string { return protoCodec.Name() }

// minPooled is the least buffer Marshal takes from gRPC's pool: one of
// its default pool's sizes, above its pooling threshold (1 KiB), below
// which mem.NewBuffer keeps a buffer out of the pool.
const minPooled = 4 << 10

// Marshal writes a RateLimitResponse into a buffer of gRPC's pool, which
// gRPC hands back once it has written it; any other message is the
// protobuf codec's (which writes a small message, such as a response,
// into a new buffer of its own).
func (codec) Marshal(v any) (mem.BufferSlice, error) {
	resp, ok := v.(*rlsv3.RateLimitResponse)
	if !ok {
		return protoCodec.Marshal(v)
	}
	size := proto.Size(resp)
	pool := mem.DefaultBufferPool()
	buf := pool.Get(max(size, minPooled))
	b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend((*buf)[:0], resp)
	if err != nil {
		pool.Put(buf)
		return nil, err
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*rlsv3.RateLimitRequest)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	return decodeRequest(messageString(data), req)
}

// messageString returns data as one string, in one allocation: the
// request's strings are slices of it (see decodeRequest).
func messageString(data mem.BufferSlice) string {
	if len(data) == 1 {
		return string(data[0].ReadOnlyData())
	}
	b := data.Materialize() // a copy of its own, which nothing else holds
	return unsafe.String(unsafe.SliceData(b), len(b))
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

// decodeRequest reads msg, a RateLimitRequest's wire bytes, into req as
// proto.Unmarshal does (unknown fields left out), without protobuf's
// reflection and taking strings as they are: no string is checked as
// UTF-8 (see ServerOption). Each descriptor value and entry key is a
// slice of msg, so that the request's strings cost no allocation beyond
// msg's; the domain is a string of its own (domainOf), since it outlives
// the request (the observers' group, a span's attribute, an override's
// limit). req is reset first, and the descriptors and entries it held
// (a pooled request's: see Register) are reused in place of new ones.
func decodeRequest(msg string, req *rlsv3.RateLimitRequest) error {
	b := unsafe.Slice(unsafe.StringData(msg), len(msg)) // read, never written
	ds := req.Descriptors[:0]
	req.Reset()
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			req.Domain = domainOf(v)
		case num == 2 && typ == protowire.BytesType:
			d := nextDescriptor(&ds)
			return decodeDescriptor(msg, b, v, d)
		case num == 3 && typ == protowire.VarintType:
			req.HitsAddend = uint32(x)
		}
		return nil
	})
	req.Descriptors = ds
	return err
}

// nextDescriptor appends to *ds the descriptor that its array holds past
// its length (reset, its entries kept for reuse), or a new one.
func nextDescriptor(ds *[]*rlv3.RateLimitDescriptor) *rlv3.RateLimitDescriptor {
	s := *ds
	var d *rlv3.RateLimitDescriptor
	if len(s) < cap(s) {
		d = s[:len(s)+1][len(s)]
	}
	if d == nil {
		d = new(rlv3.RateLimitDescriptor)
	} else {
		es := d.Entries[:0]
		d.Reset()
		d.Entries = es
	}
	*ds = append(s, d)
	return d
}

// nextEntry is nextDescriptor for an entry.
func nextEntry(es *[]*rlv3.RateLimitDescriptor_Entry) *rlv3.RateLimitDescriptor_Entry {
	s := *es
	var e *rlv3.RateLimitDescriptor_Entry
	if len(s) < cap(s) {
		e = s[:len(s)+1][len(s)]
	}
	if e == nil {
		e = new(rlv3.RateLimitDescriptor_Entry)
	} else {
		e.Reset()
	}
	*es = append(s, e)
	return e
}

// decodeDescriptor reads the descriptor v, a slice of b (msg's bytes),
// into d, reset with its entries emptied.
func decodeDescriptor(msg string, b, v []byte, d *rlv3.RateLimitDescriptor) error {
	es := d.Entries
	err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			e := nextEntry(&es)
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					e.Key = sub(msg, b, v)
				case num == 2 && typ == protowire.BytesType:
					e.Value = sub(msg, b, v)
				}
				return nil
			})
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
	d.Entries = es
	return err
}

// sub returns v, a slice of b, which is msg's bytes, as the slice of msg
// it is.
func sub(msg string, b, v []byte) string {
	if len(v) == 0 {
		return ""
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(v))) - uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	return msg[off : off+len(v)]
}

// maxInterned is the longest domain domainOf keeps.
const maxInterned = 256

// lastDomain is the domain of the last request, as domainOf returned it.
var lastDomain atomic.Pointer[string]

// domainOf returns v as a string, the last request's when it is the same
// (a service sees one domain or a few: in the steady state, no
// allocation).
func domainOf(v []byte) string {
	if p := lastDomain.Load(); p != nil && *p == string(v) {
		return *p
	}
	s := string(v)
	if len(s) <= maxInterned {
		lastDomain.Store(&s)
	}
	return s
}

// serviceDesc is the RateLimitService as rlsv3 registers it, but that
// its ShouldRateLimit handler decodes each request into a pooled one.
var serviceDesc = func() grpc.ServiceDesc {
	d := rlsv3.RateLimitService_ServiceDesc
	d.Methods = slices.Clone(d.Methods)
	for i := range d.Methods {
		if d.Methods[i].MethodName == "ShouldRateLimit" {
			d.Methods[i].Handler = shouldRateLimitHandler
		}
	}
	return d
}()

// shouldRateLimitHandler is rlsv3's handler of ShouldRateLimit on a
// request from the Server's pool, handed back once the call returns.
func shouldRateLimitHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	s := srv.(*Server)
	req, _ := s.requests.Get().(*rlsv3.RateLimitRequest)
	if req == nil {
		req = new(rlsv3.RateLimitRequest)
	}
	defer s.putRequest(req)
	if err := dec(req); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return s.ShouldRateLimit(ctx, req)
	}
	return interceptor(ctx, req, &s.info, s.unary)
}

// maxPooledEntries bounds the entries a pooled request's descriptor
// keeps for the next request.
const maxPooledEntries = 64

// putRequest hands req back to the pool, its strings dropped (they are
// slices of the message: the pool must not hold it), unless it has more
// descriptors or entries than a request should (its arrays would stay
// in the pool).
func (s *Server) putRequest(req *rlsv3.RateLimitRequest) {
	if cap(req.Descriptors) > 2*MaxDescriptors {
		return
	}
	req.Domain = ""
	for _, d := range req.Descriptors {
		if d == nil || cap(d.Entries) > maxPooledEntries {
			return
		}
		for _, e := range d.Entries {
			if e == nil {
				return
			}
			e.Key, e.Value = "", ""
		}
	}
	s.requests.Put(req)
}
