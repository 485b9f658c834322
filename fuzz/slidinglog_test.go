package fuzz

import (
	"slices"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// Byte layout of a FuzzSlidingLog input (bytes past the end read as 0):
//
//	byte 0   Limit = 1 + b%16
//	byte 1   Window = (1 + b%64) × unit, unit = (b>>6) → 1ns, 1µs, 1ms, 1s
//	then operations, two bytes each, opcode o and argument a:
//	  o%8 = 0..3  AllowN(key o>>3 % 3, cost), cost = a%(Limit+3) − 1 (−1 … Limit+1)
//	  o%8 = 4     Advance(a × Window / 16)
//	  o%8 = 5     Advance(a) nanoseconds
//	  o%8 = 6     Refund the latest admission of key o>>3 % 3 (a unused)
//	  o%8 = 7     Sweep(), then, for a ≥ 128, set the clock back by (a−128) × Window/32
//
// The oracle is brute force: every admitted unit's instant, never pruned.
// At instant t (a reading older than the latest write to the key counts as
// that write's instant) a unit counts iff t − s < Window. The target checks
// every Decision field against it, RetryAfter at −1 ns and at 0, and at the
// end that no interval [a, a+Window) of the admitted instants holds more
// than Limit units.
func FuzzSlidingLog(f *testing.F) {
	f.Add([]byte{4, 0x40 | 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 16, 0, 0})
	f.Add([]byte{0, 0, 0, 1, 5, 3, 0, 1, 7, 200, 0, 1, 6, 0, 0, 1})
	f.Add([]byte{15, 0x80 | 63, 0, 17, 1, 17, 2, 3, 4, 8, 0, 17, 7, 255, 0, 17, 6, 9, 0, 17})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &reader{b: data}
		limit := 1 + int64(r.byte()%16)
		wb := r.byte()
		unit := [...]time.Duration{1, time.Microsecond, time.Millisecond, time.Second}[wb>>6]
		W := time.Duration(1+int64(wb%64)) * unit
		clock := hotlimit.NewManualClock()
		clock.Set(time.Hour)
		l, err := hotlimit.New(hotlimit.SlidingLog{Limit: limit, Window: W},
			hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0), hotlimit.WithShards(2))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		keys := [...]string{"a", "b", "a-key-longer-than-fifteen-bytes"}
		var log [len(keys)][]int64    // admitted instants, in order
		var logGen [len(keys)][]int64 // the generation (gen) each was admitted in
		var last [len(keys)]int64     // latest instant each key was written at
		var exists [len(keys)]bool    // the limiter holds the key
		var sweptAt int64             // latest instant a key removed was fresh from
		var gen [len(keys)]int64      // how many times each key was removed
		var adm [len(keys)]hotlimit.Admission
		type admitted struct{ cost, at, gen int64 }
		var held [len(keys)]admitted // adm's admission, as the oracle sees it
		w := int64(W)

		count := func(k int, at int64) (n, newest int64) {
			for _, s := range log[k] {
				if at-s < w {
					n++
					newest = max(newest, s)
				}
			}
			return n, newest
		}
		for ops := 0; !r.empty() && ops < 300; ops++ {
			o, a := r.byte(), r.byte()
			k := int(o>>3) % len(keys)
			now := int64(clock.Now())
			switch o % 8 {
			case 4:
				clock.Advance(time.Duration(int64(a) * w / 16))
			case 5:
				clock.Advance(time.Duration(a))
			case 6:
				adm[k].Refund()
				h := held[k]
				held[k] = admitted{}
				if !exists[k] || h.cost == 0 || h.gen != gen[k] {
					break // nothing to give back: the ring it was admitted into is gone
				}
				at := max(now, last[k])
				last[k] = at
				c := h.cost
				for i := len(log[k]) - 1; i >= 0 && c > 0; i-- {
					if s := log[k][i]; s <= h.at && at-s < w {
						log[k] = slices.Delete(log[k], i, i+1)
						logGen[k] = slices.Delete(logGen[k], i, i+1)
						c--
					}
				}
				if n, _ := count(k, at); n == 0 {
					exists[k], sweptAt = false, max(sweptAt, at)
					gen[k]++
				}
			case 7:
				l.Sweep()
				for k := range keys {
					at := max(now, last[k])
					if n, _ := count(k, at); exists[k] && n == 0 {
						// The ring was fresh from its newest instant's
						// expiry, or its latest write if later, and no
						// later than the sweep's instant: new keys are
						// decided no earlier than that.
						from := last[k]
						for i, s := range log[k] {
							if logGen[k][i] == gen[k] {
								from = max(from, s+w)
							}
						}
						exists[k], sweptAt = false, max(sweptAt, min(from, at))
						gen[k]++
					}
				}
				if a >= 128 {
					clock.Set(time.Duration(max(0, now-int64(a-128)*w/32)))
				}
			default:
				cost := int64(a)%(limit+3) - 1
				d := l.AdmitN(&adm[k], keys[k], cost)
				held[k] = admitted{}
				at := max(now, sweptAt)
				if exists[k] {
					at = max(now, last[k])
				}
				n, newest := count(k, at)
				want := hotlimit.Decision{Limit: limit, Remaining: limit - n}
				if n > 0 {
					want.ResetAfter = time.Duration(newest + w - at)
				}
				switch {
				case cost < 0 || cost > limit:
					want.RetryAfter = hotlimit.Never
				case cost == 0:
					want.Allowed = true
				case n+cost <= limit:
					want.Allowed, want.Remaining, want.ResetAfter = true, limit-n-cost, W
					for range cost {
						log[k] = append(log[k], at)
						logGen[k] = append(logGen[k], gen[k])
					}
					last[k], exists[k] = at, true
					held[k] = admitted{cost, at, gen[k]}
				default:
					// The shortest wait, found by trying every expiry.
					want.RetryAfter = hotlimit.Never
					for _, s := range log[k] {
						if e := s + w - at; e > 0 {
							if m, _ := count(k, at+e); m+cost <= limit && time.Duration(e) < want.RetryAfter {
								want.RetryAfter = time.Duration(e)
							}
						}
					}
					if m, _ := count(k, at+int64(want.RetryAfter)-1); m+cost <= limit {
						t.Fatalf("op %d: oracle's RetryAfter %v is not the shortest", ops, want.RetryAfter)
					}
				}
				if d != want {
					t.Fatalf("op %d at %v: AllowN(%q, %d)\n got %+v\nwant %+v", ops, time.Duration(now), keys[k], cost, d, want)
				}
			}
		}
		// The envelope: no interval of length W holds more than Limit.
		for k := range keys {
			s := slices.Clone(log[k])
			slices.Sort(s)
			for i, j := 0, 0; j < len(s); j++ {
				for s[j]-s[i] >= w {
					i++
				}
				if int64(j-i+1) > limit {
					t.Fatalf("key %q: %d admitted within %v from %v", keys[k], j-i+1, W, time.Duration(s[i]))
				}
			}
		}
	})
}
