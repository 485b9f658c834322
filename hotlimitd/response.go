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

// response is a RateLimitResponse and what its statuses point at.
type response struct {
	resp  *rlsv3.RateLimitResponse
	parts []parts // parts[i] is status i's
}

// parts is what one status is made of.
type parts struct {
	st    rlsv3.RateLimitResponse_DescriptorStatus
	limit rlsv3.RateLimitResponse_RateLimit
	dur   durationpb.Duration
}

// newResponse returns a response with n statuses, each zero (code
// UNKNOWN, no limit). Up to 4 statuses, the response and everything its
// statuses point at are one allocation, sized for 1, 2 or 4 of them
// (about 380, 600 and 1,050 bytes): one allocation per response instead
// of four per descriptor, and no more memory than a request needs.
func newResponse(n int) response {
	switch {
	case n <= 1:
		b := new(struct {
			resp rlsv3.RateLimitResponse
			ptrs [1]*rlsv3.RateLimitResponse_DescriptorStatus
			p    [1]parts
		})
		return link(&b.resp, b.ptrs[:n], b.p[:n])
	case n == 2:
		b := new(struct {
			resp rlsv3.RateLimitResponse
			ptrs [2]*rlsv3.RateLimitResponse_DescriptorStatus
			p    [2]parts
		})
		return link(&b.resp, b.ptrs[:], b.p[:])
	case n <= 4:
		b := new(struct {
			resp rlsv3.RateLimitResponse
			ptrs [4]*rlsv3.RateLimitResponse_DescriptorStatus
			p    [4]parts
		})
		return link(&b.resp, b.ptrs[:n], b.p[:n])
	}
	return link(new(rlsv3.RateLimitResponse), make([]*rlsv3.RateLimitResponse_DescriptorStatus, n), make([]parts, n))
}

// link points resp's statuses at ps (len(ptrs) == len(ps)).
func link(resp *rlsv3.RateLimitResponse, ptrs []*rlsv3.RateLimitResponse_DescriptorStatus, ps []parts) response {
	for i := range ps {
		ptrs[i] = &ps[i].st
	}
	resp.Statuses = ptrs
	return response{resp: resp, parts: ps}
}

// fill sets status i's current_limit (l's requests_per_unit, unit and
// RuleName), limit_remaining (ls.Remaining, clamped to a uint32) and
// duration_until_reset (ls.Window; left out when unknown).
func (b response) fill(i int, l *config.Limit, ls admission.LayerState) {
	p := &b.parts[i]
	lim, dur, st := &p.limit, &p.dur, &p.st
	lim.Name, lim.RequestsPerUnit, lim.Unit = l.RuleName, l.RequestsPerUnit, unitOf(l.Unit)
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
