package httpretry

import (
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/hotlimit/hotlimit/internal/sfv"
)

// maxDuration is the longest wait a header can ask for; larger asks are
// clamped to it (never wrapped, never ignored), so they always exceed any
// deadline or MaxWait.
const maxDuration = time.Duration(math.MaxInt64)

// epochThreshold separates the two readings of X-RateLimit-Reset: a value
// of at least 1e9 is a Unix time in seconds (1e9 is 2001-09-09T01:46:40Z),
// a smaller one is a number of seconds to wait (1e9 seconds would be 31
// years).
const epochThreshold = 1_000_000_000

// ServerWait returns how long resp asks the client to wait before it sends
// another request, and reports whether it asks at all. now is the time the
// response was received.
//
// The sources, in order of precedence (the first one present and well
// formed wins):
//
//  1. Retry-After (RFC 9110, 10.2.3): delta-seconds, or an HTTP-date
//     measured against the response's Date field when it has a valid one
//     (so the client's clock skew does not matter), else against now. A
//     date in the past asks for no wait.
//  2. RateLimit (draft-ietf-httpapi-ratelimit-headers-10 and later, a
//     Structured Field List): the largest t among the service limit items
//     whose remaining quota r is 0, since every exhausted policy has to
//     refill. Items with r > 0 ask for nothing.
//  3. X-RateLimit-Reset, when X-RateLimit-Remaining is absent or 0: a
//     non-negative number of seconds (a fraction is allowed), read as a
//     Unix time when it is at least 1e9 and as a delay otherwise; a Unix
//     time is measured against Date like an HTTP-date.
//
// Retry-After takes precedence over RateLimit as the draft requires
// (section 7). A malformed field is ignored, as if absent, and the next
// source is tried: Retry-After that is neither digits nor an HTTP-date, a
// RateLimit field that is not a valid List or has an item without an
// Integer r >= 0 or with a t that is not an Integer >= 0, an
// X-RateLimit-Reset that is not a non-negative decimal number. Asks too
// large for a time.Duration are clamped to its maximum. The result is
// never negative. ServerWait never panics, whatever the header values.
func ServerWait(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	h := resp.Header
	ref := now
	if v := h.Get("Date"); v != "" {
		if d, err := http.ParseTime(v); err == nil {
			ref = d
		}
	}
	if v := h.Values("Retry-After"); len(v) > 0 {
		if d, ok := parseRetryAfter(v[0], ref); ok {
			return d, true
		}
	}
	if v := h.Values("RateLimit"); len(v) > 0 {
		if d, ok := parseRateLimit(strings.Join(v, ",")); ok {
			return d, true
		}
	}
	if v := h.Get("X-RateLimit-Reset"); v != "" {
		rem := strings.TrimSpace(h.Get("X-RateLimit-Remaining"))
		if rem == "" || strings.Trim(rem, "0") == "" {
			if d, ok := parseXReset(v, ref); ok {
				return d, true
			}
		}
	}
	return 0, false
}

// hasRetryAfter reports whether resp carries a well-formed Retry-After.
func hasRetryAfter(resp *http.Response, now time.Time) bool {
	v := resp.Header.Values("Retry-After")
	if len(v) == 0 {
		return false
	}
	_, ok := parseRetryAfter(v[0], now)
	return ok
}

// parseRetryAfter parses a Retry-After value: delta-seconds (1*DIGIT) or
// an HTTP-date, which is measured against ref. It reports false for any
// other value.
func parseRetryAfter(v string, ref time.Time) (time.Duration, bool) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return 0, false
	}
	if isDigit(v[0]) {
		return parseSeconds(v)
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return until(t, ref), true
}

// parseSeconds parses a non-empty string of ASCII digits as seconds,
// clamping to maxDuration.
func parseSeconds(v string) (time.Duration, bool) {
	var n uint64
	for i := 0; i < len(v); i++ {
		if !isDigit(v[i]) {
			return 0, false
		}
		if n <= math.MaxUint64/10 {
			n = n*10 + uint64(v[i]-'0')
		} else {
			n = math.MaxUint64
		}
	}
	return seconds(n), len(v) > 0
}

// seconds converts n seconds to a Duration, clamping to maxDuration.
func seconds(n uint64) time.Duration {
	if n > uint64(maxDuration/time.Second) {
		return maxDuration
	}
	return time.Duration(n) * time.Second
}

// until returns t - ref, or 0 when t is not after ref. time.Time.Sub
// saturates, so no overflow is possible.
func until(t, ref time.Time) time.Duration {
	if d := t.Sub(ref); d > 0 {
		return d
	}
	return 0
}

// parseRateLimit parses a RateLimit field value (several field lines
// joined with ",") and returns the largest t among the items with r = 0.
// It reports false when no such item has a t, or when the field is
// malformed: not a Structured Field List, an Inner List member, a missing
// or non-Integer or negative r, a non-Integer or negative t.
func parseRateLimit(v string) (time.Duration, bool) {
	list, err := sfv.ParseList(v)
	if err != nil {
		return 0, false
	}
	var wait time.Duration
	found := false
	for i := range list {
		m := &list[i]
		if m.IsInner {
			return 0, false
		}
		r, ok := m.Params.Get("r")
		if !ok || r.Kind != sfv.Integer || r.Int < 0 {
			return 0, false
		}
		t, hasT := m.Params.Get("t")
		if hasT && (t.Kind != sfv.Integer || t.Int < 0) {
			return 0, false
		}
		if r.Int == 0 && hasT {
			found = true
			wait = max(wait, seconds(uint64(t.Int)))
		}
	}
	return wait, found
}

// parseXReset parses an X-RateLimit-Reset value: digits with an optional
// fraction. At least epochThreshold it is a Unix time measured against
// ref, else a number of seconds. Sub-nanosecond fractions round up, so the
// wait is never shorter than asked.
func parseXReset(v string, ref time.Time) (time.Duration, bool) {
	v = strings.Trim(v, " \t")
	whole, frac, hasDot := strings.Cut(v, ".")
	if whole == "" || (hasDot && frac == "") {
		return 0, false
	}
	secs, ok := parseSeconds(whole)
	if !ok {
		return 0, false
	}
	var ns int64
	roundUp := false // a non-zero digit past the ninth
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if !isDigit(c) {
			return 0, false
		}
		if i < 9 {
			ns = ns*10 + int64(c-'0')
		} else if c != '0' {
			roundUp = true
		}
	}
	for i := len(frac); i < 9; i++ {
		ns *= 10
	}
	if secs >= epochThreshold*time.Second {
		if secs == maxDuration {
			return maxDuration, true // beyond the year 2262
		}
		t := time.Unix(int64(secs/time.Second), ns)
		if roundUp {
			t = t.Add(1)
		}
		return until(t, ref), true
	}
	d := secs + time.Duration(ns) // secs < 1e9 s: no overflow
	if roundUp {
		d++
	}
	return d, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
