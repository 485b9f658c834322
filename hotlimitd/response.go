package hotlimitd

import (
	"math"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"google.golang.org/protobuf/types/known/durationpb"
)

// inline is the number of descriptors whose statuses a response holds
// in its own allocation.
const inline = 4

// response is a RateLimitResponse and, for up to inline descriptors,
// everything its statuses point at, allocated at once: one allocation
// per response instead of four per descriptor.
type response struct {
	resp  rlsv3.RateLimitResponse
	ptrs  [inline]*rlsv3.RateLimitResponse_DescriptorStatus
	st    [inline]rlsv3.RateLimitResponse_DescriptorStatus
	limit [inline]rlsv3.RateLimitResponse_RateLimit
	dur   [inline]durationpb.Duration
	more  []parts // descriptors past inline
}

// parts is what one status points at, for a descriptor past inline.
type parts struct {
	st    rlsv3.RateLimitResponse_DescriptorStatus
	limit rlsv3.RateLimitResponse_RateLimit
	dur   durationpb.Duration
}

// newResponse returns a response with n statuses, each zero (code
// UNKNOWN, no limit).
func newResponse(n int) *response {
	b := new(response)
	if n <= inline {
		for i := range n {
			b.ptrs[i] = &b.st[i]
		}
		b.resp.Statuses = b.ptrs[:n]
		return b
	}
	b.more = make([]parts, n-inline)
	sts := make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)
	for i := range sts {
		if i < inline {
			sts[i] = &b.st[i]
		} else {
			sts[i] = &b.more[i-inline].st
		}
	}
	b.resp.Statuses = sts
	return b
}

// fill sets status i's current_limit (l's requests_per_unit, unit and
// name), limit_remaining (ls.Remaining, clamped to a uint32) and
// duration_until_reset (ls.Window; left out when unknown).
func (b *response) fill(i int, l *config.Limit, ls admission.LayerState) {
	var lim *rlsv3.RateLimitResponse_RateLimit
	var dur *durationpb.Duration
	if i < inline {
		lim, dur = &b.limit[i], &b.dur[i]
	} else {
		p := &b.more[i-inline]
		lim, dur = &p.limit, &p.dur
	}
	st := b.resp.Statuses[i]
	lim.Name, lim.RequestsPerUnit, lim.Unit = l.Name, l.RequestsPerUnit, unitOf(l.Unit)
	st.CurrentLimit = lim
	st.LimitRemaining = uint32(min(max(ls.Remaining, 0), math.MaxUint32))
	if ls.Window >= 0 && ls.Window != hotlimit.Never {
		dur.Seconds, dur.Nanos = int64(ls.Window/time.Second), int32(ls.Window%time.Second)
		st.DurationUntilReset = dur
	}
}

// unitOf returns u as the response's unit: config.Unit has the
// protocol's numbers.
func unitOf(u config.Unit) rlsv3.RateLimitResponse_RateLimit_Unit {
	return rlsv3.RateLimitResponse_RateLimit_Unit(u)
}
