package httplimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/wire"
)

// HeaderMode chooses the rate-limit header fields the middleware writes
// on every limited response (allowed or denied).
type HeaderMode uint8

const (
	// HeadersIETF writes RateLimit-Policy and RateLimit as
	// draft-ietf-httpapi-ratelimit-headers-11 defines them: one item per
	// limit the request is checked against, with q and w in the policy
	// field and that limit's own r and t in the other (see the package
	// documentation). It is the default.
	HeadersIETF HeaderMode = iota
	// HeadersLegacy writes the de-facto X-RateLimit-Limit,
	// X-RateLimit-Remaining and X-RateLimit-Reset.
	HeadersLegacy
	// HeadersBoth writes both sets.
	HeadersBoth
	// HeadersNone writes neither (Retry-After is still sent on a 429).
	HeadersNone
)

// ResetMode chooses how X-RateLimit-Reset is written.
type ResetMode uint8

const (
	// ResetSeconds writes the number of seconds from now, rounded up
	// (the default): on a 429, Retry-After's wait; on an admission and on
	// a 403, the time until every layer the request was checked against
	// is back to its full quota (0 when it is). That is not the IETF t
	// parameter, which is the time until a limit's next unit comes back.
	ResetSeconds ResetMode = iota
	// ResetEpoch writes the Unix time in seconds, rounded up, at which
	// the delta in seconds ends, read from Config.Now.
	ResetEpoch
)

// ceilSeconds rounds d up to whole seconds: a wait is never reported
// shorter than it is.
func ceilSeconds(d time.Duration) int64 { return wire.CeilSeconds(d) }

// resetSeconds is X-RateLimit-Reset in seconds for d, rounded up: on a
// denial that can pass later (429) the wait until the same request is
// admitted, ceil(RetryAfter), Retry-After's value; otherwise, on an
// admission and on a request that can never pass (403), the time until
// every layer is back to its fresh state, ceil(ResetAfter), 0 when it is.
func resetSeconds(d hotlimit.Decision) int64 {
	if !d.Allowed && d.RetryAfter != hotlimit.Never {
		return ceilSeconds(d.RetryAfter)
	}
	return ceilSeconds(d.ResetAfter)
}

// retryAfterSeconds is the Retry-After of a denial that can pass later
// (admission.OutcomeDenied): the exact wait rounded up, at least 1.
func retryAfterSeconds(d hotlimit.Decision) int64 {
	return max(1, ceilSeconds(d.RetryAfter))
}

// writeHeaders sets the rate-limit fields of a decided request of group
// gi (res.Layers() > 0) on h, all from its decision res. The RateLimit-Policy value
// describes the policies the request was decided under; it is shared by
// every response decided under the same ones (a handler may replace it or
// append to it, which copies, but must not write into its elements).
func (m *Middleware) writeHeaders(h http.Header, gi int, res *admission.Result) {
	d := res.Decision
	if m.headers == HeadersIETF || m.headers == HeadersBoth {
		var buf [160]byte
		b := buf[:0]
		if it := res.Item(0); it.Known { // the backend reported every layer's state
			b = wire.AppendItem(b, it.Name, it.Remaining, it.Window)
			for i := 1; i < res.Layers(); i++ {
				it = res.Item(i)
				b = append(b, ", "...)
				b = wire.AppendItem(b, it.Name, it.Remaining, it.Window)
			}
		} else {
			// The backend reported the binding layer's Decision only: its
			// item, with t only when the Decision tells when its next unit
			// comes back (a denied request that needed exactly one more).
			it := res.Item(res.Binding)
			window := time.Duration(0)
			if !d.Allowed && d.RetryAfter != hotlimit.Never && it.Cost == d.Remaining+1 {
				window = d.RetryAfter
			}
			b = wire.AppendItem(b, it.Name, d.Remaining, window)
		}
		h["Ratelimit-Policy"] = m.pipe.PolicyValue(res, gi)
		h["Ratelimit"] = []string{string(b)}
	}
	if m.headers == HeadersLegacy || m.headers == HeadersBoth {
		t := resetSeconds(d)
		h["X-Ratelimit-Limit"] = []string{strconv.FormatInt(d.Limit, 10)}
		h["X-Ratelimit-Remaining"] = []string{strconv.FormatInt(d.Remaining, 10)}
		if m.reset == ResetEpoch {
			// Round the instant up, so the epoch is never earlier than
			// the true reset.
			end := m.now().Add(time.Duration(t) * time.Second)
			t = end.Unix()
			if end.Nanosecond() != 0 {
				t++
			}
		}
		h["X-Ratelimit-Reset"] = []string{strconv.FormatInt(t, 10)}
	}
}
