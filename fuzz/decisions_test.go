package fuzz

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// Byte layout of a FuzzDecisions input. Bytes past the end read as 0; raw
// values are 8 bytes, big-endian, and are read only where marked.
//
//	byte 0      policy: b%4 → 0 TokenBucket, 1 LeakyBucket, 2 FixedWindow, 3 SlidingWindow
//	byte 1      time selector: the Rate (buckets, see decodeRate) or the Window
//	            (windows, see decodeWindow); selectors 13..15 read raw values
//	byte 2..    count selector: Burst, Capacity or Limit (see decodeCount);
//	            selectors 13..15 read one raw value
//	then operations, until the input ends or maxOps have run. Each is an
//	opcode byte o and an argument byte a (plus 8 raw bytes where marked);
//	x = o>>3 (0..31):
//	  o%8 = 0, 1, 2  AllowN(keys[x%3], cost(a))
//	  o%8 = 3        Advance(a × unit), unit = x%8 → 1ns, 1µs, 1ms, 1s, 1min, 1h, 24h, 365d
//	  o%8 = 4        Advance relative to the policy's scale S (T or W), see scaleAdvance
//	  o%8 = 5        huge Advance, x%4 → 0: a century; 1: raw 8 bytes >> 1 (a ignored);
//	                 2: to exactly maxTime (≈2^62), where the clock saturates; 3: to maxTime − 1 − a
//	  o%8 = 6        Sweep() on the limiter under test (a ignored); in
//	                 FuzzStaleClock instead: set the clock back by
//	                 a × unit (unit = x%8 as for o%8 = 3), or for x%8 = 7
//	                 to now·a/256
//	  o%8 = 7        Wait(keys[x%3], cost(a)) in mode (x/3)%3: waitExpired,
//	                 waitHalfway, waitJustBefore (see harness_test.go)
//
//	cost(a), L = the policy's Limit, clamped to [−1, L+1]:
//	  a < 192: a%4          192..223: a−192          224..239: L − (a−224)
//	  240..247: L+1         248..251: −1             252..255: raw%(L+3) − 1
//
// Advances are never negative: the clock only moves forward. Every
// operation is followed by the checks of harness.endOp, and the twin
// limiter is swept before every operation.
const maxOps = 400

// reader hands out the bytes of a fuzz input, then zeros.
type reader struct{ b []byte }

func (r *reader) empty() bool { return len(r.b) == 0 }

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) u64() uint64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(r.byte())
	}
	return v
}

// decodeRate reads a time selector for a bucket. Presets cover the
// extremes (1 per year, 10^9/s) and rounding cases of
// T = ⌈Per/N⌉; 13 and 14 read two raw values for a valid rate, 15 two raw
// int64s as they are (usually rejected by New).
func decodeRate(r *reader) hotlimit.Rate {
	switch r.byte() % 16 {
	case 0:
		return hotlimit.Rate{N: 1, Per: year} // 1 per year
	case 1:
		return hotlimit.Rate{N: 1_000_000_000, Per: time.Second} // T = 1ns
	case 2:
		return hotlimit.PerSecond(3) // T = 333,333,334ns: rounded up
	case 3:
		return hotlimit.Rate{N: 7, Per: 700 * time.Millisecond} // T = 100ms exactly
	case 4:
		return hotlimit.Rate{N: 1, Per: 24 * time.Hour}
	case 5:
		return hotlimit.PerSecond(10)
	case 6:
		return hotlimit.PerSecond(1000)
	case 7:
		return hotlimit.Rate{N: 1, Per: 1} // T = 1ns
	case 8:
		return hotlimit.Rate{N: 3, Per: 10} // T = 4ns
	case 9:
		return hotlimit.PerSecond(1_000_000) // T = 1µs
	case 10:
		return hotlimit.Rate{N: 2, Per: 3} // T = 2ns
	case 11:
		return hotlimit.Rate{N: 1, Per: 1 << 61} // only Burst 1 fits
	case 12:
		return hotlimit.Rate{N: 1, Per: 50 * year}
	case 13:
		n := 1 + int64(r.u64()%1_000_000_000)
		return hotlimit.Rate{N: n, Per: time.Duration(n + int64(r.u64()%(1<<42)))}
	case 14:
		n := 1 + int64(r.u64()%16)
		return hotlimit.Rate{N: n, Per: time.Duration(n + int64(r.u64()%1000))}
	default:
		return hotlimit.Rate{N: int64(r.u64()), Per: time.Duration(r.u64())}
	}
}

// decodeWindow reads a time selector for a window policy: presets from 1ns
// to the largest window New accepts (2^55ns), then raw values.
func decodeWindow(r *reader) time.Duration {
	switch r.byte() % 16 {
	case 0:
		return 1
	case 1:
		return 2
	case 2:
		return 3 * time.Millisecond
	case 3:
		return 999 * time.Millisecond
	case 4:
		return time.Second
	case 5:
		return time.Minute
	case 6:
		return time.Hour
	case 7:
		return 24 * time.Hour
	case 8:
		return 7 * 24 * time.Hour
	case 9:
		return year
	case 10:
		return 1 << 55
	case 11:
		return 10
	case 12:
		return time.Microsecond
	case 13:
		return time.Duration(1 + r.u64()%(1<<40))
	case 14:
		return time.Duration(1 + r.u64()%(1<<55))
	default:
		return time.Duration(r.u64())
	}
}

// decodeCount reads a count selector: Burst, Capacity or Limit. 0 is valid
// only as a Capacity. 13 and 14 read a raw value for a valid count, 15 a
// raw int64 as it is.
func decodeCount(r *reader) int64 {
	switch r.byte() % 16 {
	case 0:
		return 1
	case 1:
		return 2
	case 2:
		return 3
	case 3:
		return 5
	case 4:
		return 0
	case 5:
		return 64
	case 6:
		return 65
	case 7:
		return 1000
	case 8:
		return 1_000_000
	case 9:
		return 999_999
	case 10:
		return 1 << 20
	case 11:
		return 7
	case 12:
		return 100
	case 13:
		return 1 + int64(r.u64()%1_000_000)
	case 14:
		return 1 + int64(r.u64()%(1<<21-1))
	default:
		return int64(r.u64())
	}
}

// decodePolicy reads the policy header of an input.
func decodePolicy(r *reader) hotlimit.Policy {
	switch r.byte() % 4 {
	case 0:
		rate := decodeRate(r)
		return hotlimit.TokenBucket{Rate: rate, Burst: decodeCount(r)}
	case 1:
		rate := decodeRate(r)
		return hotlimit.LeakyBucket{Rate: rate, Capacity: decodeCount(r)}
	case 2:
		w := decodeWindow(r)
		return hotlimit.FixedWindow{Limit: decodeCount(r), Window: w}
	default:
		w := decodeWindow(r)
		return hotlimit.SlidingWindow{Limit: decodeCount(r), Window: w}
	}
}

// decodeCost reads cost(a) of the layout.
func decodeCost(a byte, r *reader, limit int64) int64 {
	var c int64
	switch {
	case a < 192:
		c = int64(a % 4)
	case a < 224:
		c = int64(a - 192)
	case a < 240:
		c = limit - int64(a-224)
	case a < 248:
		c = limit + 1
	case a < 252:
		c = -1
	default:
		c = int64(r.u64()%uint64(limit+3)) - 1
	}
	return min(max(c, -1), limit+1)
}

// scaleAdvance returns an advance relative to the policy's scale S (T for
// the buckets, W for the windows), chosen by j = x%8 with argument a:
//
//	0: a·S    1: a·S − 1    2: a·S + 1    3: a·S/16
//	4: the reset horizon (Limit·T or 2W), minus 1 if a is odd
//	5: S − a    6: a·S/3    7: (a+1)·S/256
func scaleAdvance(p params, j int, a int64) int64 {
	s := p.scale()
	switch j {
	case 0:
		return satMul(a, s)
	case 1:
		return max(0, satMul(a, s)-1)
	case 2:
		return satAdd(satMul(a, s), 1)
	case 3:
		return mulDiv(a, s, 16)
	case 4:
		return max(0, p.maxReset()-a%2)
	case 5:
		return max(0, s-a)
	case 6:
		return mulDiv(a, s, 3)
	default:
		return mulDiv(a+1, s, 256)
	}
}

var smallUnits = [8]time.Duration{1, time.Microsecond, time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour, year}

// runDecisions decodes and runs one FuzzDecisions input.
func runDecisions(t *testing.T, data []byte) { runOps(t, data, false) }

// runStale decodes and runs one FuzzStaleClock input.
func runStale(t *testing.T, data []byte) { runOps(t, data, true) }

// runOps decodes and runs an input in the layout above. With stale, opcode
// 6 sets the clock back instead of sweeping.
func runOps(t *testing.T, data []byte, stale bool) {
	r := &reader{b: data}
	policy := decodePolicy(r)
	h, err := newHarness(t, policy, policy, false)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "hotlimit: ") {
			t.Fatalf("New(%#v): error %q lacks the \"hotlimit: \" prefix", policy, err)
		}
		return // an invalid configuration: nothing to run
	}
	h.stale = stale
	for n := 0; n < maxOps && !r.empty(); n++ {
		h.sweepTwin()
		o := r.byte()
		a := r.byte()
		x := int(o >> 3)
		switch o % 8 {
		case 0, 1, 2:
			h.allow(x%3, decodeCost(a, r, h.limit))
		case 3:
			h.advance(satMul(int64(a), int64(smallUnits[x%8])))
		case 4:
			h.advance(scaleAdvance(h.params, x%8, int64(a)))
		case 5:
			switch x % 4 {
			case 0:
				h.advance(int64(century))
			case 1:
				h.advance(int64(r.u64() >> 1))
			case 2:
				h.advance(max(0, maxTime-h.now()))
			default:
				h.advance(max(0, maxTime-1-int64(a)-h.now()))
			}
		case 6:
			switch {
			case !stale:
				h.sweep()
			case x%8 == 7:
				h.setBack(h.now() - mulDiv(h.now(), int64(a), 256))
			default:
				h.setBack(satMul(int64(a), int64(smallUnits[x%8])))
			}
		case 7:
			h.wait(x%3, decodeCost(a, r, h.limit), (x/3)%3)
		}
		h.endOp()
	}
}

// FuzzDecisions checks, at every step of a decoded operation stream (see
// the byte layout above):
//
//   - the limiter decides exactly as refmodel (every Decision field);
//   - a twin limiter swept before every operation decides identically
//     (sweeps are invisible), and each Sweep removes exactly the fresh keys;
//   - each field obeys its definition on its own: Limit, Remaining in
//     [0, Limit], fresh ⇔ full, admitted ⇔ cost ≤ Remaining before,
//     Remaining drops by exactly cost, ResetAfter and RetryAfter follow the
//     closed forms, Delay only for leaky admissions and equal to the debt;
//   - honesty, on clones of the model: denied 1ns before now+RetryAfter and
//     admitted at it; fresh exactly at now+ResetAfter, not 1ns before;
//     exactly Remaining unit requests pass now (when Remaining ≤ 64); all
//     only while the instant stays at or below maxTime (≈2^62), where the clock saturates;
//   - a denial (and a failed Wait) leaves the key's state unchanged;
//   - the admissions stay inside the algorithm's envelope (see envelope);
//   - Wait fails at once without consuming when its context has expired or
//     its deadline is before the slot, and admits at once, consuming exactly
//     what AllowN would, when the slot is now; it never blocks;
//   - Len and Stats match the keys held and the requests counted.
func FuzzDecisions(f *testing.F) {
	for _, s := range decisionSeeds() {
		f.Add(s)
	}
	f.Fuzz(runDecisions)
}

// FuzzStaleClock is FuzzDecisions with a clock that can be set back (the
// byte layout is the same, but opcode 6 sets the clock back instead of
// sweeping). The semantics: a reading older than what a key's state already
// reflects counts as "no time has passed"; state never moves backwards and
// nothing extra is admitted. The model encodes exactly that (a bucket
// decides from max(TAT, now); a window state newer than the reading is
// read at the start of its own window), so every oracle of FuzzDecisions
// applies, except those that measure from the reading for a window policy
// (RetryAfter and ResetAfter count from the state's window then) and the
// sweeps (nothing is swept: see harness.stale). Admissions at stale
// readings are left out of the envelope.
func FuzzStaleClock(f *testing.F) {
	for _, s := range decisionSeeds() {
		f.Add(s)
	}
	for _, s := range staleSeeds() {
		f.Add(s)
	}
	f.Fuzz(runStale)
}

// Seed builders, in the byte layout above.

// pol returns a policy header: kind, time selector, count selector, and
// the raw values those selectors read, in order.
func pol(kind, timeSel, countSel byte, raw ...uint64) []byte {
	b := []byte{kind, timeSel}
	if timeSel%16 >= 13 {
		n := 1
		if kind%4 <= 1 { // rates read two raw values
			n = 2
		}
		for range n {
			b = binary.BigEndian.AppendUint64(b, raw[0])
			raw = raw[1:]
		}
	}
	b = append(b, countSel)
	if countSel%16 >= 13 {
		b = binary.BigEndian.AppendUint64(b, raw[0])
	}
	return b
}

// Cost bytes.
const (
	c0, c1, c2, c3 = 0, 1, 2, 3
	cLimit         = 224 // L
	cLimitMinus1   = 225 // L−1
	cLimitPlus1    = 240 // L+1
	cNeg           = 248 // −1
)

func allow(key int, cost byte) []byte   { return []byte{byte(key << 3), cost} }
func adv(unit int, a byte) []byte       { return []byte{byte(unit<<3) | 3, a} }
func advScale(j int, a byte) []byte     { return []byte{byte(j<<3) | 4, a} }
func century1() []byte                  { return []byte{5, 0} }
func toSaturation() []byte              { return []byte{2<<3 | 5, 0} }
func toBeforeSaturation(a byte) []byte  { return []byte{3<<3 | 5, a} }
func sweepOp() []byte                   { return []byte{6, 0} }
func wait(key, mode int, c byte) []byte { return []byte{byte((mode*3+key)<<3) | 7, c} }
func setBack(unit int, a byte) []byte   { return []byte{byte(unit<<3) | 6, a} }
func setBackTo(a byte) []byte           { return []byte{7<<3 | 6, a} }
func advRaw(d uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{1<<3 | 5, 0}, d<<1)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// Time units of adv.
const (
	uNs, uMicro, uMs, uSec, uMin, uHour, uDay, uYear = 0, 1, 2, 3, 4, 5, 6, 7
)

func decisionSeeds() [][]byte {
	return [][]byte{
		// The worked example: PerSecond(3), Burst 1. The second request
		// is denied with RetryAfter 333,333,334; denied again 1ns before T
		// (scale advance a·T − 1), admitted at T.
		cat(pol(0, 2, 0), allow(0, c1), allow(0, c1), advScale(1, 1), allow(0, c1), adv(uNs, 1), allow(0, c1)),
		// 1 per year, Burst 3: drain with cost L, L+1 and −1 are denied
		// with Never, then idle for a century and refill at once.
		cat(pol(0, 0, 2), allow(1, cLimit), allow(1, c1), allow(1, cLimitPlus1), allow(1, cNeg), century1(), allow(1, cLimit), allow(2, c2)),
		// 10^9/s (T = 1ns) with Burst 1,000,000: costs of L, L−1 and 1ns
		// steps; Remaining is large, so only the closed forms check it.
		cat(pol(0, 1, 8), allow(0, cLimit), allow(0, c1), adv(uNs, 3), allow(0, c3), allow(0, cLimitMinus1), adv(uMs, 1), allow(0, cLimitMinus1), allow(2, cLimit)),
		// Leaky bucket, 10/s, Capacity 0 (no queue): the second request
		// in the same instant is denied; after T it passes with Delay 0.
		cat(pol(1, 5, 4), allow(0, c1), allow(0, c1), advScale(0, 1), allow(0, c1), allow(0, cLimitPlus1)),
		// Leaky bucket, 7/700ms (T = 100ms), Capacity 5: a queue builds
		// up with growing Delay, the 7th is denied; partial drains.
		cat(pol(1, 3, 3), allow(0, c1), allow(0, c1), allow(0, c2), allow(0, c2), allow(0, c1), advScale(7, 100), allow(0, c1), advScale(3, 20), allow(0, c3)),
		// Wait on a leaky bucket: immediate on a fresh key (modes 1, 2),
		// an expired context (mode 0), then a queue so that the slot is in
		// the future and both deadline modes fail without consuming.
		cat(pol(1, 3, 3), wait(0, 1, c1), adv(uMs, 200), wait(0, 2, c1), wait(0, 0, c1), allow(0, c3), wait(0, 1, c1), wait(0, 2, c2), wait(0, 1, cLimitPlus1), wait(0, 2, c0)),
		// Wait on a token bucket, 1/24h Burst 2: immediate admits, then
		// the drained bucket makes the slot hours away.
		cat(pol(0, 4, 1), wait(2, 2, c1), wait(2, 1, c1), wait(2, 1, c1), wait(2, 2, c2), advScale(0, 1), wait(2, 2, c1), wait(2, 0, cNeg)),
		// Fixed window, Limit 5, 1s: fill, deny at the window's last ns,
		// admit at the next window's first ns.
		cat(pol(2, 4, 3), adv(uMs, 250), allow(0, cLimit), allow(0, c1), advRaw(uint64(750*time.Millisecond-1)), allow(0, c1), adv(uNs, 1), allow(0, c1), advScale(4, 1), allow(0, c1), adv(uNs, 1), allow(0, c1)),
		// Fixed window of 1ns: every instant is a new window.
		cat(pol(2, 0, 0), allow(0, c1), allow(0, c1), adv(uNs, 1), allow(0, c1), allow(1, c2), adv(uNs, 2), allow(1, c1)),
		// Wait on windows: immediate, then denied with the deadline
		// halfway to the next window, and just before it.
		cat(pol(2, 5, 1), wait(1, 1, c1), wait(1, 2, c1), wait(1, 1, c1), wait(1, 2, c1), advScale(0, 1), wait(1, 2, cLimit)),
		// Sliding window, Limit 3, 999ms: fill late in one window, so the
		// previous count's weight decays through the next one and
		// RetryAfter ends inside the current window.
		cat(pol(3, 3, 2), advScale(7, 200), allow(0, cLimit), advScale(7, 100), allow(0, c1), advScale(3, 3), allow(0, c1), advScale(3, 5), allow(0, c2), advScale(0, 2), allow(0, c1)),
		// Sliding window, Limit 1,000,000 over 24h: big counts, exact
		// integer weights near the limit.
		cat(pol(3, 7, 8), adv(uHour, 20), allow(0, cLimitMinus1), allow(0, c2), adv(uHour, 5), allow(0, cLimitMinus1), allow(0, c3), adv(uMin, 30), allow(0, cLimit), adv(uHour, 12), allow(0, c3)),
		// Sliding window, Limit 64, 1s: Remaining near the 64 cut-off of
		// the unit-count oracle, and a twin sweep as the counts expire.
		cat(pol(3, 4, 5), allow(0, cLimitMinus1), allow(0, c2), advScale(0, 1), allow(0, c1), advScale(4, 1), allow(0, c1), adv(uNs, 1), allow(0, c0), sweepOp()),
		// Sweeps: keys admitted, one refills; Sweep must remove exactly
		// the fresh ones, and decisions go on unchanged.
		cat(pol(0, 5, 2), allow(0, c1), allow(1, c3), allow(2, c2), advScale(0, 1), sweepOp(), advScale(0, 2), sweepOp(), allow(1, c1), sweepOp(), allow(0, c0), century1(), sweepOp(), allow(2, c1)),
		// Saturation: the clock stops at maxTime (≈2^62). Admissions just before,
		// at it, and past it (RetryAfter beyond maxTime is not checked).
		cat(pol(0, 3, 2), toBeforeSaturation(3), allow(0, cLimit), adv(uNs, 1), allow(0, c1), toSaturation(), allow(0, c1), allow(0, c1), century1(), allow(0, c1), advRaw(1<<62), allow(1, c1)),
		// Saturation on a sliding window of one year.
		cat(pol(3, 9, 3), toBeforeSaturation(0), allow(0, cLimit), toSaturation(), allow(0, c1), adv(uYear, 255), allow(0, c1)),
		// T = 2^61 (1 per 2^61ns) with Burst 1: the largest interval New
		// accepts for a unit burst.
		cat(pol(0, 11, 0), allow(0, c1), allow(0, c1), century1(), allow(0, c1), advScale(0, 1), allow(0, c1)),
		// Rounding: 3 per 10ns (T = 4ns), Burst 7; steps of T−1, T, T+1.
		cat(pol(0, 8, 11), allow(0, cLimit), advScale(1, 1), allow(0, c1), adv(uNs, 1), allow(0, c1), advScale(2, 1), allow(0, c2), advScale(1, 2), allow(0, c2)),
		// Raw rate (N = 1+2 = 3, Per = 3 + 1000%1000 = 3, so T = 1ns) and
		// a raw count (1 + 41): the selectors that read raw values.
		cat(pol(0, 14, 13, 2, 1000, 41), allow(0, c3), allow(0, cLimit), adv(uNs, 5), allow(0, c3)),
		// Invalid configurations are skipped: Burst 0, and a raw rate
		// with N = −1.
		pol(0, 5, 4),
		cat(pol(0, 15, 0, 1<<64-1, 1000), allow(0, c1)),
		// Window of 2^55ns, the largest New accepts, with Limit 2.
		cat(pol(2, 10, 1), allow(0, c2), allow(0, c1), advScale(0, 1), allow(0, c1), century1(), allow(0, c1)),
	}
}

func staleSeeds() [][]byte {
	return [][]byte{
		// Token bucket 10/s, Burst 3: drain, set the clock back 1s, and
		// the bucket must not have refilled (x/time/rate's golang/go#71360).
		cat(pol(0, 5, 2), adv(uSec, 5), allow(0, cLimit), setBack(uSec, 1), allow(0, c1), adv(uMs, 100), allow(0, c1), adv(uSec, 1), allow(0, c1)),
		// Leaky bucket: a queue built, then a stale reading sees a longer
		// debt (Delay) and must not admit beyond Capacity·T from it.
		cat(pol(1, 3, 3), adv(uSec, 2), allow(0, c3), setBack(uMs, 150), allow(0, c1), allow(0, c2), adv(uMs, 200), allow(0, c1)),
		// Fixed window, Limit 5 per second: fill the window, go back
		// into the previous window, where nothing more may pass.
		cat(pol(2, 4, 3), adv(uMs, 250), adv(uSec, 1), allow(0, cLimit), setBack(uMs, 200), setBack(uMs, 200), setBack(uMs, 200), setBack(uMs, 100), allow(0, c1), allow(1, c1), adv(uMs, 250), adv(uMs, 250), adv(uMs, 200), allow(0, c1), adv(uSec, 1), allow(0, c1)),
		// Sliding window, Limit 3 per 999ms: counts in two windows, then
		// stale readings within and before the previous window.
		cat(pol(3, 3, 2), adv(uMs, 200), adv(uSec, 1), allow(0, c2), adv(uSec, 1), allow(0, c1), setBack(uMs, 250), setBack(uMs, 250), allow(0, c1), setBack(uMs, 250), setBack(uMs, 250), setBack(uMs, 250), setBack(uMs, 150), allow(0, c2), adv(uSec, 2), allow(0, c3)),
		// Back to 0 (setBackTo(0)) after a century of 1-per-year refills.
		cat(pol(0, 0, 2), century1(), allow(0, cLimit), setBackTo(0), allow(0, c1), wait(0, 1, c1), century1(), allow(0, c1)),
		// A window key written late, then the clock set far back: the
		// harness keeps the set-back within its index horizon.
		cat(pol(2, 0, 0), adv(uYear, 100), allow(0, c1), setBackTo(128), allow(0, c1), adv(uYear, 200), allow(0, c1)),
	}
}
