package hotlimit

import (
	"fmt"
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
// integer and the duration positive.
func ParseRate(s string) (Rate, error) {
	num, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("hotlimit: rate %q: want N/duration, such as 100/s or 5/250ms", s)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil {
		return Rate{}, fmt.Errorf("hotlimit: rate %q: count: %w", s, err)
	}
	per = strings.TrimSpace(per)
	if per != "" && (per[0] < '0' || per[0] > '9') && !strings.ContainsRune(".+-", rune(per[0])) {
		per = "1" + per // "s" means "1s"; "-1m" stays negative, and is rejected below
	}
	d, err := time.ParseDuration(per)
	if err != nil {
		return Rate{}, fmt.Errorf("hotlimit: rate %q: duration: %w", s, err)
	}
	if d <= 0 {
		return Rate{}, fmt.Errorf("hotlimit: rate %q: the duration must be positive, got %v", s, d)
	}
	r := Rate{N: n, Per: d}
	if err := r.validate("rate"); err != nil {
		return Rate{}, fmt.Errorf("%w (parsing %q)", err, s)
	}
	return r, nil
}
