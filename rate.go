package hotlimit

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Rate is N events per Per. The zero Rate is invalid.
type Rate struct {
	N   int64
	Per time.Duration
}

// PerSecond returns a Rate of n events per second.
func PerSecond(n int64) Rate { return Rate{N: n, Per: time.Second} }

// PerMinute returns a Rate of n events per minute.
func PerMinute(n int64) Rate { return Rate{N: n, Per: time.Minute} }

// PerHour returns a Rate of n events per hour.
func PerHour(n int64) Rate { return Rate{N: n, Per: time.Hour} }

// String formats r in the form ParseRate reads, such as "100/1s".
func (r Rate) String() string { return strconv.FormatInt(r.N, 10) + "/" + r.Per.String() }

// Interval returns the emission interval T = ⌈Per/N⌉: the time one event
// takes to be replenished. It rounds up, towards denying; the error is under
// 1 ns per event. It returns 0 for a Rate that validate rejects.
func (r Rate) Interval() time.Duration {
	if r.N <= 0 || r.Per <= 0 {
		return 0
	}
	return time.Duration((int64(r.Per)-1)/r.N + 1)
}

// validate reports why r cannot be used, naming the field with prefix.
func (r Rate) validate(field string) error {
	switch {
	case r.N <= 0:
		return fmt.Errorf("hotlimit: %s.N must be > 0, got %d", field, r.N)
	case r.Per <= 0:
		return fmt.Errorf("hotlimit: %s.Per must be > 0, got %v", field, r.Per)
	case int64(r.Per) < r.N:
		// T = ⌈Per/N⌉ would round a sub-nanosecond interval up to 1 ns,
		// an error of more than 1 ns per event: reject, don't approximate.
		return fmt.Errorf("hotlimit: %s %v is faster than 1 event per nanosecond", field, r)
	}
	return nil
}

// ParseRate parses a rate written as "N/unit" or "N/duration", such as
// "100/s", "100/1m", "5/250ms" or "1/24h". Units are those of
// time.ParseDuration; a bare unit means one of it. N must be a positive
// integer and the duration positive, and the rate no faster than one
// request per nanosecond. Spaces around N and the duration are ignored.
//
// An error says, in the string's own terms, which part is wrong (the count
// before the slash, the slash, the duration after it) and what that part
// accepts, such as
//
//	hotlimit: rate "100/1y": "1y" after the slash is not a duration: write a number and a unit (ns, us, ms, s, m, h), such as 1m, 250ms or 24h (a day), or a unit alone (10/s)
//
// so that a program can show it to whoever wrote the string as it is.
func ParseRate(s string) (Rate, error) {
	bad := func(format string, args ...any) (Rate, error) {
		return Rate{}, fmt.Errorf("hotlimit: rate %q: "+format, append([]any{s}, args...)...)
	}
	num, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	num, per = strings.TrimSpace(num), strings.TrimSpace(per)
	switch {
	case !ok:
		return bad("%s", rateForm)
	case strings.Contains(per, "/"):
		return bad("one slash only: %s", rateForm)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(num, "-"):
		return bad("the count %s is too large (at most %d)", num, int64(math.MaxInt64))
	case err != nil || n < 1:
		return bad("the count before the slash must be a whole number of at least 1, got %q", num)
	}
	unit := per
	if per != "" && (per[0] < '0' || per[0] > '9') && !strings.ContainsRune(".+-", rune(per[0])) {
		unit = "1" + per // "s" means "1s"; "-1m" stays negative, and is rejected below
	}
	d, err := time.ParseDuration(unit)
	switch {
	case per == "":
		return bad("the duration after the slash is missing: %s", durationForm)
	case err != nil && !isDurationSyntax(unit):
		return bad("%q after the slash is not a duration: %s", per, durationForm)
	case err == nil && d <= 0, err != nil && unit[0] == '-':
		return bad("the duration after the slash must be positive, got %q", per)
	case err != nil: // well formed, so too long for time.Duration
		return bad("the duration %q after the slash is too long: at most %dh (about 292 years)", per, int64(math.MaxInt64/int64(time.Hour)))
	case int64(d) < n:
		return bad("%d per %v is faster than one request per nanosecond, the finest step of the clock", n, d)
	}
	r := Rate{N: n, Per: d}
	if err := r.validate("rate"); err != nil { // cannot fail after the checks above
		return Rate{}, fmt.Errorf("%w (parsing %q)", err, s)
	}
	return r, nil
}

// rateForm and durationForm say what ParseRate accepts, for its errors.
const (
	rateForm     = "write N/duration: a whole number, a slash and a duration, such as 100/1m, 10/s or 5/250ms"
	durationForm = "write a number and a unit (ns, us, ms, s, m, h), such as 1m, 250ms or 24h (a day), or a unit alone (10/s)"
)

// isDurationSyntax reports whether s is written as time.ParseDuration
// reads a duration (an optional sign, then numbers each followed by a
// unit), so that an error parsing it can only be an overflow.
func isDurationSyntax(s string) bool {
	s = strings.TrimLeft(s, "+-")
	if s == "" {
		return false
	}
	for s != "" {
		i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i <= 0 || strings.Count(s[:i], ".") > 1 || s[:i] == "." {
			return false // no number, a malformed one, or a number with no unit
		}
		s = s[i:]
		j := strings.IndexFunc(s, func(r rune) bool { return '0' <= r && r <= '9' || r == '.' })
		if j < 0 {
			j = len(s)
		}
		switch s[:j] {
		case "ns", "us", "µs", "μs", "ms", "s", "m", "h":
		default:
			return false
		}
		s = s[j:]
	}
	return true
}
