package httpretry

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit/internal/sfv"
)

// FuzzRetryAfter feeds arbitrary values to the Retry-After and
// X-RateLimit-Reset parsers and to ServerWait: they must not panic and any
// wait must be >= 0. It also round-trips valid values built from the
// fuzzer's numbers: n as delta-seconds must parse to exactly n seconds
// (clamped), and the Unix time unix formatted as an HTTP-date must parse
// to its exact distance from the reference time (0 when past).
//
// Inputs: s, an arbitrary header value; n, delta-seconds; unix, seconds
// since 1970, folded into the years 0001-9999 that an HTTP-date can hold.
func FuzzRetryAfter(f *testing.F) {
	f.Add("120", uint64(120), int64(1_800_000_000))                     // plain delta
	f.Add("Sun, 06 Nov 1994 08:49:37 GMT", uint64(0), int64(784111777)) // RFC 9110's example date
	f.Add("Sunday, 06-Nov-94 08:49:37 GMT", uint64(1<<63), int64(-1))   // RFC 850 form, huge delta
	f.Add("1.5", uint64(99999999999), int64(253402300799))              // a fraction; year 9999
	f.Add("99999999999999999999999", uint64(0), int64(-62135596800))    // overflow; year 1
	f.Add(" \t-3", uint64(1), int64(0))                                 // malformed
	f.Fuzz(func(t *testing.T, s string, n uint64, unix int64) {
		if d, ok := parseRetryAfter(s, ref); ok && d < 0 {
			t.Fatalf("parseRetryAfter(%q) = %v", s, d)
		}
		if d, ok := parseXReset(s, ref); ok && d < 0 {
			t.Fatalf("parseXReset(%q) = %v", s, d)
		}
		resp := &http.Response{Header: http.Header{}}
		for _, k := range []string{"Retry-After", "RateLimit", "X-RateLimit-Reset", "Date"} {
			resp.Header.Set(k, s)
		}
		if d, _ := ServerWait(resp, ref); d < 0 {
			t.Fatalf("ServerWait with every field %q = %v", s, d)
		}

		// Round trip: delta-seconds.
		if d, ok := parseRetryAfter(strconv.FormatUint(n, 10), ref); !ok || d != seconds(n) {
			t.Fatalf("parseRetryAfter(%d) = %v, %v; want %v", n, d, ok, seconds(n))
		}
		// Round trip: HTTP-date.
		const lo, hi = -62135596800, 253402300799 // 0001-01-01 .. 9999-12-31T23:59:59
		u := lo + int64(uint64(unix)%uint64(hi-lo+1))
		at := time.Unix(u, 0).UTC()
		d, ok := parseRetryAfter(at.Format(http.TimeFormat), ref)
		if !ok || d != until(at, ref) {
			t.Fatalf("parseRetryAfter(%s) = %v, %v; want %v", at.Format(http.TimeFormat), d, ok, until(at, ref))
		}
		// Round trip: X-RateLimit-Reset as a delay (below 1e9) or a Unix time.
		if x := n % (2 * epochThreshold); x < epochThreshold {
			if d, ok := parseXReset(strconv.FormatUint(x, 10), ref); !ok || d != seconds(x) {
				t.Fatalf("parseXReset(%d) = %v, %v", x, d, ok)
			}
		} else if d, ok := parseXReset(strconv.FormatUint(x, 10), ref); !ok || d != until(time.Unix(int64(x), 0), ref) {
			t.Fatalf("parseXReset(%d) = %v, %v", x, d, ok)
		}
	})
}

// FuzzRateLimitField feeds arbitrary values to the RateLimit field parser
// (and sfv.ParseList under it): no panic, any wait >=
// 0, and a wait only with an item that has r=0. It also round-trips a
// valid field built from the fuzzer's values: a policy named name (made a
// valid sf-string) with remaining r and reset t, followed by a second
// policy with remaining 1; the wait must be t seconds exactly when r is 0,
// and there must be none otherwise.
func FuzzRateLimitField(f *testing.F) {
	f.Add(`"default";r=0;t=30`, "default", uint64(0), uint64(30))
	f.Add(`"burst";r=0;t=3, "daily";r=0;t=30`, "daily", uint64(5), uint64(0))
	f.Add(`"peruser";r=0;t=10;pk=:cHsdsRa894==:`, `quo"te\`, uint64(0), uint64(999999999999999))
	f.Add(`("a" "b");r=0;t=1, %"%c3%bc";x=@1`, "ü", uint64(1), uint64(7))
	f.Add(`"d";r=0;t=1.5,`, "", uint64(1<<63), uint64(1<<63))
	f.Fuzz(func(t *testing.T, s, name string, r, reset uint64) {
		if list, err := sfv.ParseList(s); err == nil && len(list) == 0 && strings.Trim(s, " \t") != "" {
			t.Fatalf("sfv.ParseList(%q): no members and no error", s)
		}
		d, ok := parseRateLimit(s)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("parseRateLimit(%q) = %v, %v", s, d, ok)
		}
		if ok && !strings.Contains(s, "r=0") && !strings.Contains(s, "r=-0") {
			t.Fatalf("parseRateLimit(%q) = %v without an r=0 item", s, d)
		}

		// Round trip.
		const maxInt = 999_999_999_999_999 // the largest sf-integer
		r, reset = r%(maxInt+1), reset%(maxInt+1)
		field := quoteSF(name) + ";r=" + strconv.FormatUint(r, 10) + ";t=" + strconv.FormatUint(reset, 10) +
			`, "other";r=1;t=5`
		d, ok = parseRateLimit(field)
		want, wantOK := time.Duration(0), false
		if r == 0 {
			want, wantOK = seconds(reset), true
		}
		if d != want || ok != wantOK {
			t.Fatalf("parseRateLimit(%q) = %v, %v; want %v, %v", field, d, ok, want, wantOK)
		}
	})
}

// quoteSF serialises s as an sf-string, dropping the bytes it cannot
// hold (RFC 9651, 4.1.6).
func quoteSF(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			continue
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}
