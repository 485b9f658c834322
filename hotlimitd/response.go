package hotlimitd

import (
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"github.com/hotlimit/hotlimit/internal/wire"
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
// RuleName), limit_remaining (ls.Decision.Remaining, clamped to a uint32) and
// duration_until_reset (ls.Next; left out when unknown).
func (b response) fill(i int, l *config.Limit, ls hotlimit.LayerState) {
	p := &b.parts[i]
	lim, dur, st := &p.limit, &p.dur, &p.st
	lim.Name, lim.RequestsPerUnit, lim.Unit = l.RuleName, l.RequestsPerUnit, unitOf(l.Unit)
	st.CurrentLimit = lim
	st.LimitRemaining = uint32(min(max(ls.Decision.Remaining, 0), math.MaxUint32))
	if ls.Next >= 0 && ls.Next != hotlimit.Never {
		dur.Seconds, dur.Nanos = int64(ls.Next/time.Second), int32(ls.Next%time.Second)
		st.DurationUntilReset = dur
	}
}

// unitOf returns u as the response's unit: config.Unit has the
// protocol's numbers.
func unitOf(u config.Unit) rlsv3.RateLimitResponse_RateLimit_Unit {
	return rlsv3.RateLimitResponse_RateLimit_Unit(u)
}

// The header names of envoyproxy/ratelimit's LIMIT_LIMIT_HEADER,
// LIMIT_REMAINING_HEADER and LIMIT_RESET_HEADER by default.
const (
	DefaultLimitHeader     = "RateLimit-Limit"
	DefaultRemainingHeader = "RateLimit-Remaining"
	DefaultResetHeader     = "RateLimit-Reset"
)

// LimitHeaders names envoyproxy/ratelimit's three response headers
// (Options.LimitHeaders); an empty name is the default one.
type LimitHeaders struct {
	Limit     string // requests_per_unit (DefaultLimitHeader)
	Remaining string // limit_remaining (DefaultRemainingHeader)
	Reset     string // duration_until_reset in whole seconds, rounded up (DefaultResetHeader)
}

// add appends to hdr the three headers of the status that
// envoyproxy/ratelimit picks among sts: the last one OVER_LIMIT, else
// the first with the least limit_remaining among those with a
// current_limit; none when no status has a current_limit. Reset is left
// out when the status has no duration_until_reset (the backend cannot
// tell).
func (h *LimitHeaders) add(hdr []*corev3.HeaderValue, sts []*rlsv3.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	var pick *rlsv3.RateLimitResponse_DescriptorStatus
	for _, st := range sts {
		switch {
		case st.CurrentLimit == nil:
		case st.Code == rlsv3.RateLimitResponse_OVER_LIMIT:
			pick = st
		case pick == nil || pick.Code != rlsv3.RateLimitResponse_OVER_LIMIT && st.LimitRemaining < pick.LimitRemaining:
			pick = st
		}
	}
	if pick == nil {
		return hdr
	}
	v := new(struct {
		ptrs [3]*corev3.HeaderValue
		vs   [3]corev3.HeaderValue
	})
	v.vs[0] = corev3.HeaderValue{Key: h.Limit, Value: strconv.FormatUint(uint64(pick.CurrentLimit.RequestsPerUnit), 10)}
	v.vs[1] = corev3.HeaderValue{Key: h.Remaining, Value: strconv.FormatUint(uint64(pick.LimitRemaining), 10)}
	n := 2
	if d := pick.DurationUntilReset; d != nil {
		v.vs[2] = corev3.HeaderValue{Key: h.Reset, Value: strconv.FormatInt(wire.CeilSeconds(d.AsDuration()), 10)}
		n = 3
	}
	for i := range n {
		v.ptrs[i] = &v.vs[i]
	}
	return append(hdr[:len(hdr):len(hdr)], v.ptrs[:n]...)
}
