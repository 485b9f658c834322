package admission

import (
	"strconv"
	"time"

	"github.com/hotlimit/hotlimit"
)

// PolicyItem returns the RateLimit-Policy item (draft-ietf-httpapi-
// ratelimit-headers) of a limit under an item name: "name";q=…;w=…, with
// q = pi.Limit and w = pi.Period() in whole seconds, rounded up, and at
// least 1 (the draft allows no sub-second window). For each algorithm:
//
//   - FixedWindow, SlidingWindow and SlidingLog: q = Limit, w = Window.
//   - TokenBucket: it has no window. q = Burst, the most a client can
//     send at once, and w = Burst × the emission interval, the time an
//     empty bucket takes to refill the whole burst. At the sustained rate
//     a client gets q per w, which is exactly Rate; on top of that a full
//     bucket allows a burst of q.
//   - LeakyBucket: q = Capacity+1 (one request starts at once and
//     Capacity wait their turn) and w = q × the interval, the time the
//     queue takes to drain.
//
// A q beyond the 15 digits of an RFC 9651 Integer is written as
// MaxSFInt, which understates the quota (a client that trusts it sends
// less, never more).
func PolicyItem(name string, pi hotlimit.PolicyInfo) string {
	return `"` + name + `";q=` + strconv.FormatInt(min(pi.Limit, MaxSFInt), 10) + ";w=" + strconv.FormatInt(max(1, CeilSeconds(pi.Period())), 10)
}

// MaxSFInt is the largest RFC 9651 Integer (15 digits).
const MaxSFInt = 999_999_999_999_999

// CeilSeconds rounds d up to whole seconds (0 for d ≤ 0): a wait is
// never reported shorter than it is.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
