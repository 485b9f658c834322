package fuzz

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// newPolicy builds the policy FuzzNew asks for: kind%10 selects
//
//	0 TokenBucket{Rate{a, b}, c}    4..7  pointers to the same four
//	1 LeakyBucket{Rate{a, b}, c}    8     a nil *TokenBucket
//	2 FixedWindow{a, b}             9     a nil Policy
//	3 SlidingWindow{a, b}
//
// value is the policy as a value (nil for 8 and 9).
func newPolicy(kind uint8, a, b, c int64) (policy, value hotlimit.Policy) {
	switch kind % 10 {
	case 0, 4:
		value = hotlimit.TokenBucket{Rate: hotlimit.Rate{N: a, Per: time.Duration(b)}, Burst: c}
	case 1, 5:
		value = hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: a, Per: time.Duration(b)}, Capacity: c}
	case 2, 6:
		value = hotlimit.FixedWindow{Limit: a, Window: time.Duration(b)}
	case 3, 7:
		value = hotlimit.SlidingWindow{Limit: a, Window: time.Duration(b)}
	case 8:
		return (*hotlimit.TokenBucket)(nil), nil
	default:
		return nil, nil
	}
	if kind%10 < 4 {
		return value, value
	}
	switch v := value.(type) {
	case hotlimit.TokenBucket:
		return &v, value
	case hotlimit.LeakyBucket:
		return &v, value
	case hotlimit.FixedWindow:
		return &v, value
	default:
		v2 := v.(hotlimit.SlidingWindow)
		return &v2, value
	}
}

// modest reports whether a policy value is one that New must accept: every
// field in range, far from any overflow or packing limit.
func modest(value hotlimit.Policy) bool {
	rateOK := func(r hotlimit.Rate, count int64) bool {
		if r.N < 1 || r.Per < time.Duration(r.N) || r.Per > 100*year {
			return false
		}
		t := int64(r.Interval())
		return count <= 1_000_000 && count <= (1<<50)/t
	}
	switch v := value.(type) {
	case hotlimit.TokenBucket:
		return v.Burst >= 1 && rateOK(v.Rate, v.Burst)
	case hotlimit.LeakyBucket:
		return v.Capacity >= 0 && rateOK(v.Rate, v.Capacity+1)
	// Windows: New also rejects ring-mode packings whose horizon is under
	// 24 h (window.go); these ranges stay clear of that.
	case hotlimit.FixedWindow:
		return v.Limit >= 1 && v.Limit <= 1_000_000 && v.Window >= time.Millisecond && v.Window <= 1<<50
	case hotlimit.SlidingWindow:
		return v.Limit >= 1 && v.Limit <= 1_000_000 && v.Window >= time.Second && v.Window <= 1<<50
	}
	return false
}

// invalid reports whether the semantics require New to reject a policy
// value: N ≤ 0, Per ≤ 0, Burst or Limit ≤ 0, Capacity < 0, Window ≤ 0.
func invalid(value hotlimit.Policy) bool {
	switch v := value.(type) {
	case hotlimit.TokenBucket:
		return v.Rate.N <= 0 || v.Rate.Per <= 0 || v.Burst <= 0
	case hotlimit.LeakyBucket:
		return v.Rate.N <= 0 || v.Rate.Per <= 0 || v.Capacity < 0
	case hotlimit.FixedWindow:
		return v.Limit <= 0 || v.Window <= 0
	case hotlimit.SlidingWindow:
		return v.Limit <= 0 || v.Window <= 0
	}
	return true
}

// FuzzNew feeds New arbitrary configurations and options. New must
// either return an error that starts with "hotlimit: " (and names the
// policy's type when the policy is at fault), or a limiter that, on a short
// sequence of extreme operations (cost = Limit and Limit+1, idling for a
// century, running into the clock's saturation near 2^62), decides exactly as
// the model under every oracle of FuzzDecisions. It must accept every
// modest configuration, and reject what the semantics call invalid (N ≤ 0,
// Per ≤ 0, Burst or Limit ≤ 0, Capacity < 0, Window ≤ 0), invalid options,
// nil pointers and a nil Policy.
//
// Options: shards ≠ 0 is passed to WithShards (values in (64, 65536] are
// lowered to 64 to keep executions fast: New allocates the shards);
// maxKeys to WithMaxKeys; sweep to WithSweepInterval, raised to at least
// 100µs when positive (a background sweeper then runs during the sequence,
// and must be invisible too).
func FuzzNew(f *testing.F) {
	// The token bucket's worked example, default options.
	f.Add(uint8(0), int64(3), int64(time.Second), int64(1), 0, 0, int64(0))
	// 1 per year, Burst 1000: Burst·T exceeds 2^61 → rejected.
	f.Add(uint8(0), int64(1), int64(year), int64(1000), 0, 0, int64(0))
	// 10^9/s, Burst 10^9: the largest burst at T = 1ns accepted by the tests.
	f.Add(uint8(0), int64(1_000_000_000), int64(time.Second), int64(1_000_000_000), 4, 0, int64(0))
	// Faster than 1 per ns: rejected.
	f.Add(uint8(0), int64(2), int64(1), int64(1), 0, 0, int64(0))
	// N, Per, Burst at the int64 extremes.
	f.Add(uint8(0), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), 0, 0, int64(0))
	f.Add(uint8(1), int64(math.MinInt64), int64(-1), int64(math.MinInt64), 0, 0, int64(0))
	// Leaky bucket with no queue (Capacity 0), and with Capacity −1.
	f.Add(uint8(1), int64(10), int64(time.Second), int64(0), 1, 1, int64(0))
	f.Add(uint8(1), int64(10), int64(time.Second), int64(-1), 0, 0, int64(0))
	// Leaky bucket with the largest capacity at T = 1ns.
	f.Add(uint8(1), int64(1), int64(1), int64(1<<61-2), 0, 0, int64(0))
	// Windows: 24h with Limit 10^6 (must be exact), 1ns, the largest
	// window, a window just past it, Limit beyond the packed counts.
	f.Add(uint8(3), int64(1_000_000), int64(24*time.Hour), int64(0), 0, 0, int64(0))
	f.Add(uint8(2), int64(1), int64(1), int64(0), 0, 0, int64(0))
	f.Add(uint8(2), int64(5), int64(1<<55), int64(0), 0, 0, int64(0))
	f.Add(uint8(3), int64(5), int64(1<<55+1), int64(0), 0, 0, int64(0))
	f.Add(uint8(2), int64(1<<50), int64(time.Second), int64(0), 0, 0, int64(0))
	f.Add(uint8(3), int64(1<<21-1), int64(time.Second), int64(0), 0, 0, int64(0))
	f.Add(uint8(3), int64(1<<21), int64(time.Second), int64(0), 0, 0, int64(0))
	// Pointers to policies, a nil pointer, a nil Policy.
	f.Add(uint8(4), int64(5), int64(time.Minute), int64(5), 0, 0, int64(0))
	f.Add(uint8(7), int64(5), int64(time.Minute), int64(0), 0, 0, int64(0))
	f.Add(uint8(8), int64(5), int64(time.Minute), int64(5), 0, 0, int64(0))
	f.Add(uint8(9), int64(5), int64(time.Minute), int64(5), 0, 0, int64(0))
	// Bad options: WithShards 0 (passed as −1 here: 0 means "not given"),
	// 2^20; WithMaxKeys −1; WithSweepInterval −1.
	f.Add(uint8(0), int64(5), int64(time.Second), int64(5), -1, 0, int64(0))
	f.Add(uint8(0), int64(5), int64(time.Second), int64(5), 1<<20, 0, int64(0))
	f.Add(uint8(0), int64(5), int64(time.Second), int64(5), 0, -1, int64(0))
	f.Add(uint8(0), int64(5), int64(time.Second), int64(5), 0, 0, int64(-1))
	// A background sweeper every 100µs during the sequence, and MaxKeys 1.
	f.Add(uint8(2), int64(3), int64(time.Millisecond), int64(0), 3, 1, int64(1))
	f.Fuzz(func(t *testing.T, kind uint8, a, b, c int64, shards, maxKeys int, sweep int64) {
		policy, value := newPolicy(kind, a, b, c)
		var opts []hotlimit.Option
		optErr := false
		if shards != 0 {
			optErr = shards < 1 || shards > 1<<16
			if shards > 64 && !optErr {
				shards = 64
			}
			opts = append(opts, hotlimit.WithShards(shards))
		}
		opts = append(opts, hotlimit.WithMaxKeys(maxKeys))
		optErr = optErr || maxKeys < 0
		if sweep > 0 {
			sweep = max(sweep, int64(100*time.Microsecond))
			if avoidKnownBugs && value != nil && paramsOf(value).horizon > 0 {
				// A background sweep chunk that reads the clock just
				// before one of the sequence's century jumps, and judges a
				// word the sequence wrote after it, can remove a live
				// window key in ring mode (see known_bugs_test.go): no
				// background sweeper for those.
				sweep = 0
			}
		}
		opts = append(opts, hotlimit.WithSweepInterval(time.Duration(sweep)))
		optErr = optErr || sweep < 0

		if value == nil || optErr || invalid(value) {
			l, err := hotlimit.New(policy, opts...)
			if err == nil {
				l.Close()
				t.Fatalf("New(%#v) with shards %d, maxKeys %d, sweep %d succeeded; want an error", policy, shards, maxKeys, sweep)
			}
			if !strings.HasPrefix(err.Error(), "hotlimit: ") {
				t.Fatalf("New(%#v): error %q lacks the \"hotlimit: \" prefix", policy, err)
			}
			return
		}
		h, err := newHarness(t, policy, value, sweep > 0, opts...)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "hotlimit: ") {
				t.Fatalf("New(%#v): error %q lacks the \"hotlimit: \" prefix", policy, err)
			}
			if name := policyName(value); !strings.Contains(msg, name) {
				t.Fatalf("New(%#v): error %q does not name the policy's field (%s)", policy, err, name)
			}
			if modest(value) {
				t.Fatalf("New(%#v) rejected a modest configuration: %v", policy, err)
			}
			return
		}
		runNewSequence(h, maxKeys)
	})
}

// policyName returns the type name of a policy value.
func policyName(value hotlimit.Policy) string {
	switch value.(type) {
	case hotlimit.TokenBucket:
		return "TokenBucket"
	case hotlimit.LeakyBucket:
		return "LeakyBucket"
	case hotlimit.FixedWindow:
		return "FixedWindow"
	}
	return "SlidingWindow"
}

// runNewSequence runs FuzzNew's fixed operations. With WithMaxKeys(1) it
// uses one key, so that no eviction can make the limiter differ from the
// model.
func runNewSequence(h *harness, maxKeys int) {
	k0, k1 := 0, 2
	if maxKeys == 1 {
		k1 = 0
	}
	L := h.limit
	ops := []func(){
		func() { h.allow(k0, 1) },
		func() { h.allow(k0, L) },
		func() { h.allow(k0, L+1) },
		func() { h.allow(k0, -1) },
		func() { h.wait(k0, 1, waitExpired) },
		func() { h.wait(k0, 1, waitHalfway) },
		func() { h.advance(int64(century)) },
		func() { h.allow(k0, L) },
		func() { h.allow(k1, L) },
		func() { h.allow(k0, 0) },
		func() { h.advance(1) },
		func() { h.allow(k0, 1) },
		func() { h.sweep() },
		func() { h.advance(h.scale()) },
		func() { h.wait(k1, L, waitJustBefore) },
		func() { h.allow(k0, 1) },
		func() { h.advance(max(0, maxTime-1-h.now())) },
		func() { h.allow(k0, L) },
		func() { h.advance(1) },
		func() { h.allow(k0, 1) },
		func() { h.allow(k1, 1) },
		func() { h.advance(int64(century)) },
		func() { h.allow(k0, 1) },
		func() { h.sweep() },
	}
	for _, op := range ops {
		h.sweepTwin()
		op()
		h.endOp()
	}
}
