// Package wire writes what the transports put on the wire and share:
// the RateLimit-Policy and RateLimit items of draft-ietf-httpapi-
// ratelimit-headers (httplimit's header fields, grpclimit's metadata,
// hotlimitd's response headers), the rounding of a wait to whole seconds,
// and a request's API token as a header or metadata entry carries it. It
// is internal to the module tree: httplimit, grpclimit and hotlimitd
// import it, and nothing of it is public API.
package wire

import (
	"strings"
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
	return string(AppendPolicyItem(nil, name, pi))
}

// AppendPolicyItem appends PolicyItem(name, pi) to b.
func AppendPolicyItem(b []byte, name string, pi hotlimit.PolicyInfo) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `";q=`...)
	b = appendDec(b, uint64(min(max(pi.Limit, 0), MaxSFInt)))
	b = append(b, ";w="...)
	return appendDec(b, uint64(max(1, CeilSeconds(pi.Period()))))
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

// AppendItem appends one RateLimit item (draft-ietf-httpapi-ratelimit-
// headers-11) to b: "name";r=…;t=…, with r = remaining, clamped to
// [0, MaxSFInt], and t = window rounded up to whole seconds, left out
// when window is 0 (the limit is full: nothing comes back) or
// hotlimit.Never (unknown). name is written as it is: it must be a valid
// sf-string body (a limit name from configuration, never a request's
// key). httplimit's RateLimit field and hotlimitd's response headers are
// written with it.
func AppendItem(b []byte, name string, r int64, window time.Duration) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `";r=`...)
	b = appendDec(b, uint64(min(max(r, 0), MaxSFInt)))
	if window > 0 && window != hotlimit.Never {
		b = append(b, ";t="...)
		b = appendDec(b, uint64(CeilSeconds(window))) // ≤ 9,223,372,037: always fits
	}
	return b
}

// appendDec appends u in decimal, as strconv.AppendUint(b, u, 10) does,
// but writes the digits straight into b, two at a time: strconv writes
// them into a buffer of its own and appends that, through two calls,
// which took about 60 of its 100 instructions for a field's numbers
// (callgrind).
func appendDec(b []byte, u uint64) []byte {
	n := decLen(u)
	l := len(b)
	if cap(b)-l < n {
		b = append(b, make([]byte, n)...)
	}
	b = b[:l+n]
	d := b[l:]
	i := n
	for u >= 100 {
		q := u / 100
		j := (u - q*100) * 2
		i -= 2
		d[i], d[i+1] = digitPairs[j], digitPairs[j+1]
		u = q
	}
	if u >= 10 {
		d[i-2], d[i-1] = digitPairs[u*2], digitPairs[u*2+1]
	} else {
		d[i-1] = byte('0' + u)
	}
	return b
}

// digitPairs holds "00" to "99".
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// decLen returns the number of decimal digits of u (1 for 0).
func decLen(u uint64) int {
	n := 1
	for ; u >= 10_000; u /= 10_000 {
		n += 4
	}
	switch {
	case u >= 1000:
		return n + 3
	case u >= 100:
		return n + 2
	case u >= 10:
		return n + 1
	}
	return n
}

// TokenOf returns the token of a request that carries vs in the header
// or metadata entry a token is read from: the first value, trimmed, and,
// when bearer, its Bearer credential (see BearerToken); false when there
// is none.
func TokenOf(vs []string, bearer bool) (string, bool) {
	if len(vs) == 0 {
		return "", false
	}
	tok := strings.TrimSpace(vs[0])
	if bearer {
		return BearerToken(tok)
	}
	return tok, tok != ""
}

// BearerToken returns the credential of an Authorization value of the
// Bearer scheme (the scheme name case-insensitively, surrounding spaces
// trimmed), and false for another scheme or an empty credential.
func BearerToken(v string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimSpace(cred)
	return cred, cred != ""
}
