package hotlimit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

func TestNewRejectsBadConfig(t *testing.T) {
	year := 365 * 24 * time.Hour
	cases := []struct {
		policy hotlimit.Policy
		opts   []hotlimit.Option
		want   string // substring of the error
	}{
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(0), Burst: 1}, nil, "TokenBucket.Rate.N must be > 0, got 0"},
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(-3), Burst: 1}, nil, "got -3"},
		{hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 0}, Burst: 1}, nil, "TokenBucket.Rate.Per must be > 0"},
		{hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 2_000_000_000, Per: time.Second}, Burst: 1}, nil, "faster than 1 event per nanosecond"},
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 0}, nil, "TokenBucket.Burst must be > 0, got 0"},
		{hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: year}, Burst: 1000}, nil, "TokenBucket.Burst 1000"},
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1 << 62}, nil, "overflow"},
		{hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(1), Capacity: -1}, nil, "LeakyBucket.Capacity must be ≥ 0"},
		{hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(1), Capacity: 1<<63 - 1}, nil, "LeakyBucket.Capacity"},
		{hotlimit.FixedWindow{Limit: 0, Window: time.Second}, nil, "FixedWindow.Limit must be > 0, got 0"},
		{hotlimit.FixedWindow{Limit: 5, Window: -time.Second}, nil, "FixedWindow.Window must be > 0, got -1s"},
		{hotlimit.FixedWindow{Limit: 1 << 50, Window: time.Second}, nil, "does not fit the packed state"},
		{hotlimit.SlidingWindow{Limit: 1 << 21, Window: time.Second}, nil, "SlidingWindow.Limit 2097152 does not fit"},
		{hotlimit.SlidingWindow{Limit: 5, Window: 1 << 60}, nil, "SlidingWindow.Window"},
		{hotlimit.SlidingLog{Limit: hotlimit.MaxLogLimit + 1, Window: time.Minute}, nil, "use SlidingWindow"},
		{hotlimit.SlidingLog{Limit: 0, Window: time.Minute}, nil, "SlidingLog.Limit must be > 0, got 0"},
		{hotlimit.SlidingLog{Limit: 5, Window: 0}, nil, "SlidingLog.Window must be > 0, got 0s"},
		{hotlimit.SlidingLog{Limit: 5, Window: 1 << 60}, nil, "SlidingLog.Window"},
		{(*hotlimit.SlidingLog)(nil), nil, "nil *SlidingLog"},
		{nil, nil, "nil Policy"},
		{(*hotlimit.TokenBucket)(nil), nil, "nil *TokenBucket"},
		{(*hotlimit.LeakyBucket)(nil), nil, "nil *LeakyBucket"},
		{(*hotlimit.FixedWindow)(nil), nil, "nil *FixedWindow"},
		{(*hotlimit.SlidingWindow)(nil), nil, "nil *SlidingWindow"},
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, []hotlimit.Option{hotlimit.WithShards(0)}, "WithShards"},
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, []hotlimit.Option{hotlimit.WithShards(1 << 20)}, "WithShards"},
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, []hotlimit.Option{hotlimit.WithMaxKeys(-1)}, "WithMaxKeys: n must be ≥ 0, got -1"},
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, []hotlimit.Option{hotlimit.WithSweepInterval(-time.Second)}, "WithSweepInterval"},
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, []hotlimit.Option{hotlimit.WithClock(nil)}, "nil Clock"},
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, []hotlimit.Option{hotlimit.WithCoarseClock(0)}, "WithCoarseClock"},
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, []hotlimit.Option{nil}, "nil Option"},
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, []hotlimit.Option{hotlimit.WithCoarseClock(time.Millisecond), hotlimit.WithClock(hotlimit.NewManualClock())}, "mutually exclusive"},
	}
	for _, tc := range cases {
		l, err := hotlimit.New(tc.policy, tc.opts...)
		if err == nil {
			l.Close()
			t.Errorf("New(%+v) succeeded, want error containing %q", tc.policy, tc.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), "hotlimit: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %q, want prefix \"hotlimit: \" and %q", tc.policy, err, tc.want)
		}
	}
}

func TestNewAcceptsExtremes(t *testing.T) {
	year := 365 * 24 * time.Hour
	for _, p := range []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: year}, Burst: 1},
		hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1_000_000_000, Per: time.Second}, Burst: 1_000_000_000},
		hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 1, Per: year}, Capacity: 10},
		hotlimit.FixedWindow{Limit: 1_000_000, Window: 24 * time.Hour},
		hotlimit.SlidingWindow{Limit: 1_000_000, Window: 24 * time.Hour},
		hotlimit.SlidingWindow{Limit: 1<<21 - 1, Window: time.Second},
		&hotlimit.FixedWindow{Limit: 1, Window: time.Nanosecond},
		hotlimit.SlidingLog{Limit: hotlimit.MaxLogLimit, Window: 24 * time.Hour},
		&hotlimit.SlidingLog{Limit: 1, Window: time.Nanosecond},
	} {
		l, err := hotlimit.New(p)
		if err != nil {
			t.Errorf("New(%+v): %v", p, err)
			continue
		}
		if d := l.Allow("k"); !d.Allowed {
			t.Errorf("%+v: first request denied: %+v", p, d)
		}
		l.Close()
	}
}

func TestParseRate(t *testing.T) {
	good := map[string]hotlimit.Rate{
		"100/s":     hotlimit.PerSecond(100),
		"100/1m":    hotlimit.PerMinute(100),
		"5/250ms":   {N: 5, Per: 250 * time.Millisecond},
		" 7 / h ":   hotlimit.PerHour(7),
		"1/8760h":   {N: 1, Per: 8760 * time.Hour},
		"1000000/s": hotlimit.PerSecond(1_000_000),
		"3/1.5s":    {N: 3, Per: 1500 * time.Millisecond},
	}
	for s, want := range good {
		got, err := hotlimit.ParseRate(s)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "100", "/s", "x/s", "100/", "100/x", "0/s", "-1/s", "5/-1s", "5/0s",
		"99999999999999999999/s", "100/99999999999h", "2000000000/s", "1e3/s", "100/s/s"} {
		if r, err := hotlimit.ParseRate(s); err == nil {
			t.Errorf("ParseRate(%q) = %v, want error", s, r)
		} else if !strings.HasPrefix(err.Error(), "hotlimit: ") {
			t.Errorf("ParseRate(%q) error %q lacks the hotlimit: prefix", s, err)
		}
	}
	// A signed duration is read as such, not as a unit: "-1m" is negative.
	for _, s := range []string{"100/-1m", "5/-1ns", "5/+0s", "5/0s"} {
		if _, err := hotlimit.ParseRate(s); err == nil || !strings.Contains(err.Error(), "the duration after the slash must be positive") {
			t.Errorf("ParseRate(%q) error %v: want one about the duration's sign, not its unit", s, err)
		}
	}
	if r, err := hotlimit.ParseRate("5/+1s"); err != nil || r != hotlimit.PerSecond(5) {
		t.Errorf(`ParseRate("5/+1s") = %v, %v`, r, err)
	}
}

// TestParseRateMessages: a string ParseRate refuses is explained in its
// own terms (the count before the slash, the slash, the duration after
// it) with what that part accepts, never with a field's name (rate.N) or
// the text of strconv or time.ParseDuration (which, for "100/s/s", spoke
// of "1s/s", a string nobody wrote).
func TestParseRateMessages(t *testing.T) {
	const durationForm = "write a number and a unit (ns, us, ms, s, m, h), such as 1m, 250ms or 24h (a day), or a unit alone (10/s)"
	for s, want := range map[string]string{
		"100":                    "write N/duration: a whole number, a slash and a duration, such as 100/1m, 10/s or 5/250ms",
		"100/s/s":                "one slash only: write N/duration: a whole number, a slash and a duration, such as 100/1m, 10/s or 5/250ms",
		"0/s":                    `the count before the slash must be a whole number of at least 1, got "0"`,
		"-1/s":                   `the count before the slash must be a whole number of at least 1, got "-1"`,
		" x /s":                  `the count before the slash must be a whole number of at least 1, got "x"`,
		"1e3/s":                  `the count before the slash must be a whole number of at least 1, got "1e3"`,
		"99999999999999999999/s": "the count 99999999999999999999 is too large (at most 9223372036854775807)",
		"100/":                   "the duration after the slash is missing: " + durationForm,
		"100/1y":                 `"1y" after the slash is not a duration: ` + durationForm,
		"100/x":                  `"x" after the slash is not a duration: ` + durationForm,
		"5/1.5.5s":               `"1.5.5s" after the slash is not a duration: ` + durationForm,
		"100/0s":                 `the duration after the slash must be positive, got "0s"`,
		"100/-99999999999h":      `the duration after the slash must be positive, got "-99999999999h"`,
		"100/99999999999h":       `the duration "99999999999h" after the slash is too long: at most 2562047h (about 292 years)`,
		"2000000000/s":           "2000000000 per 1s is faster than one request per nanosecond, the finest step of the clock",
		"1001/1us":               "1001 per 1µs is faster than one request per nanosecond, the finest step of the clock",
	} {
		_, err := hotlimit.ParseRate(s)
		if full := fmt.Sprintf("hotlimit: rate %q: %s", s, want); err == nil || err.Error() != full {
			t.Errorf("ParseRate(%q) error:\n got %v\nwant %s", s, err, full)
			continue
		}
		for _, internal := range []string{"rate.N", "rate.Per", "time:", "strconv", "ParseInt"} {
			if strings.Contains(err.Error(), internal) {
				t.Errorf("ParseRate(%q) error names %q: %v", s, internal, err)
			}
		}
	}
}

func TestRateRoundTrip(t *testing.T) {
	for _, r := range []hotlimit.Rate{hotlimit.PerSecond(3), {N: 5, Per: 250 * time.Millisecond}, hotlimit.PerHour(1)} {
		got, err := hotlimit.ParseRate(r.String())
		if err != nil || got != r {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", r.String(), got, err, r)
		}
	}
}

func TestKeyTooLong(t *testing.T) {
	l, _ := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 5}, hotlimit.WithSweepInterval(0))
	defer l.Close()
	k := strings.Repeat("x", hotlimit.MaxKeyLen+1)
	if d := l.Allow(k); d.Allowed || d.RetryAfter != hotlimit.Never {
		t.Fatalf("over-long key: %+v, want denied with Never", d)
	}
	if l.Len() != 0 {
		t.Fatalf("over-long key created state: Len() = %d", l.Len())
	}
	if d := l.Allow(k[:hotlimit.MaxKeyLen]); !d.Allowed {
		t.Fatalf("key of MaxKeyLen denied: %+v", d)
	}
}

func TestNewRejectsShortRingHorizon(t *testing.T) {
	for _, p := range []hotlimit.Policy{
		hotlimit.FixedWindow{Limit: 1 << 40, Window: time.Nanosecond},
		hotlimit.SlidingWindow{Limit: 1_000_000, Window: time.Millisecond},
	} {
		if l, err := hotlimit.New(p); err == nil {
			l.Close()
			t.Errorf("New(%+v) accepted a horizon under 24h", p)
		} else if !strings.Contains(err.Error(), "use a longer Window or a smaller Limit") {
			t.Errorf("New(%+v): %v", p, err)
		}
	}
	// Ring mode with a long horizon is accepted: 2^22 s is 48 days.
	if l, err := hotlimit.New(hotlimit.SlidingWindow{Limit: 1_000_000, Window: time.Second}); err != nil {
		t.Errorf("SlidingWindow 1e6/1s: %v", err)
	} else {
		l.Close()
	}
}
