package httpretry

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

var ref = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{" 5\t", 5 * time.Second, true},
		{"007", 7 * time.Second, true},
		{"99999999999999999999999", maxDuration, true}, // clamped, never wrapped
		{"9223372036", 9223372036 * time.Second, true},
		{"9223372037", maxDuration, true},
		{ref.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{ref.Add(-90 * time.Second).Format(http.TimeFormat), 0, true},
		{"Sunday, 29-Nov-26 12:00:30 GMT", 30 * time.Second, true}, // RFC 850
		{"Sun Nov 29 12:00:30 2026", 30 * time.Second, true},       // asctime
		{"", 0, false},
		{"  ", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"5s", 0, false},
		{"+5", 0, false},
		{"5, 6", 0, false},
		{"tomorrow", 0, false},
		{"Sun, 29 Nov 2026 25:00:00 GMT", 0, false},
	} {
		got, ok := parseRetryAfter(tc.in, ref)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseXReset(t *testing.T) {
	epoch := ref.Unix()
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"30", 30 * time.Second, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"0.0000000001", 1, true}, // below a nanosecond rounds up
		{"2.9999999999", 3 * time.Second, true},
		{"999999999", 999999999 * time.Second, true}, // the largest delay
		{itoa(epoch + 45), 45 * time.Second, true},   // a Unix time
		{itoa(epoch+45) + ".25", 45*time.Second + 250*time.Millisecond, true},
		{itoa(epoch - 45), 0, true}, // already past
		{"1000000000", 0, true},     // 2001: past
		{"99999999999999999999", maxDuration, true},
		{"", 0, false},
		{"-3", 0, false},
		{"3.", 0, false},
		{".5", 0, false},
		{"1e3", 0, false},
		{"3.x", 0, false},
		{"Sun, 29 Nov 2026 12:00:00 GMT", 0, false},
	} {
		got, ok := parseXReset(tc.in, ref)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseXReset(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestParseRateLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{`"default";r=0;t=30`, 30 * time.Second, true},
		{`"default";r=50;t=30`, 0, false},
		{`"default";r=0`, 0, false}, // exhausted, but no reset given
		{`"a";r=0;t=5, "b";r=0;t=50,"c";r=1;t=500`, 50 * time.Second, true},
		{`"a";r=0;t=5;pk=:cHsdsRa894==:;acme-x="y"`, 5 * time.Second, true},
		{`default;r=0;t=5`, 5 * time.Second, true}, // a token names the policy: accepted
		{`"d";t=5;r=0`, 5 * time.Second, true},     // parameter order does not matter
		{`"d";r=0;t=5;t=7`, 7 * time.Second, true}, // a repeated key keeps the last value
		{`"d";r=0;t=999999999999999`, maxDuration, true},
		{"", 0, false},
		{`"d";r=0;t=-5`, 0, false},
		{`"d";r=-1;t=5`, 0, false},
		{`"d";r=0;t=5.0`, 0, false},
		{`"d";r=0;t="5"`, 0, false},
		{`"d";r=0;t`, 0, false}, // t=?1, a Boolean
		{`"d";t=5`, 0, false},   // r is required
		{`"d";r=0;t=5,`, 0, false},
		{`"d";r=0;t=5 x`, 0, false},
		{`("d");r=0;t=5`, 0, false},
		{`"d";r=0;T=5`, 0, false}, // keys are lowercase
		{`"d";r=0;t=1000000000000000`, 0, false},
		{`"d;r=0;t=5`, 0, false},
		{`"a";r=1;t=5, "b";r=0;t=x`, 0, false}, // one bad item spoils the field
	} {
		got, ok := parseRateLimit(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRateLimit(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestServerWaitPrecedence(t *testing.T) {
	h := func(kv ...string) *http.Response {
		r := &http.Response{Header: http.Header{}}
		for i := 0; i < len(kv); i += 2 {
			r.Header.Add(kv[i], kv[i+1])
		}
		return r
	}
	for _, tc := range []struct {
		resp *http.Response
		want time.Duration
		ok   bool
	}{
		{nil, 0, false},
		{h(), 0, false},
		{h("Retry-After", "3", "RateLimit", `"d";r=0;t=9`, "X-RateLimit-Reset", "20"), 3 * time.Second, true},
		{h("RateLimit", `"d";r=0;t=9`, "X-RateLimit-Reset", "20"), 9 * time.Second, true},
		{h("RateLimit", `"d";r=1;t=9`, "X-RateLimit-Reset", "20"), 20 * time.Second, true},
		// Several RateLimit field lines form one list.
		{h("RateLimit", `"a";r=0;t=4`, "RateLimit", `"b";r=0;t=8`), 8 * time.Second, true},
		{h("X-RateLimit-Remaining", "00", "X-RateLimit-Reset", "20"), 20 * time.Second, true},
		{h("X-RateLimit-Remaining", "junk", "X-RateLimit-Reset", "20"), 0, false},
		// A Date in the client's past moves an HTTP-date ask accordingly.
		{h("Date", ref.Format(http.TimeFormat), "Retry-After", ref.Add(10*time.Second).Format(http.TimeFormat)), 10 * time.Second, true},
		{h("Date", "garbage", "Retry-After", ref.Add(10*time.Second).Format(http.TimeFormat)), 70 * time.Second, true},
	} {
		got, ok := ServerWait(tc.resp, ref.Add(-time.Minute))
		if got != tc.want || ok != tc.ok {
			var hdr http.Header
			if tc.resp != nil {
				hdr = tc.resp.Header
			}
			t.Errorf("ServerWait(%v) = %v, %v; want %v, %v", hdr, got, ok, tc.want, tc.ok)
		}
	}
}
