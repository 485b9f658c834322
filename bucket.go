package hotlimit

// gcra holds the parameters of the token bucket and the leaky bucket,
// which share one algorithm and one state word.
//
// State word: the key's theoretical arrival time (TAT) in nanoseconds on the
// limiter's clock, as a uint64. A fresh key has TAT 0; any TAT ≤ now is
// equivalent to it (bucket full, nobody waiting).
//
// Invariants:
//   - 0 ≤ now ≤ maxTime, T ≥ 1, tau = limit·T ≤ maxTau.
//   - TAT − now ≤ tau after any admission by AllowN; Wait may push TAT up to
//     maxReserve past now, so TAT < maxTime + maxReserve + maxTau < 2^63,
//     and no sum below overflows int64.
//   - A denial and a peek never change the word; an admission moves TAT
//     forward, never back.
type gcra struct {
	t     int64   // emission interval T, ns
	tau   int64   // limit·T: how far TAT may run ahead of now
	limit int64   // Burst, or Capacity+1 for the leaky bucket
	leaky bool    // report Delay (shaping) instead of 0
	per   divisor // divides by T
}

func newGCRA(r Rate, limit int64, leaky bool) gcra {
	t := int64(r.Interval())
	return gcra{t: t, tau: limit * t, limit: limit, leaky: leaky, per: newDivisor(uint64(t))}
}

// tat returns the theoretical arrival time held in a state word.
func tat(w uint64) int64 { return int64(w) }

// packTAT returns the state word that holds TAT t.
func packTAT(t int64) uint64 { return uint64(t) }

// remaining returns how many unit requests fit when the bucket owes debt.
func (g *gcra) remaining(debt int64) int64 {
	if debt >= g.tau {
		return 0
	}
	q, _ := g.per.div(uint64(g.tau - debt))
	return int64(q)
}

// step decides a request of cost 0 ≤ c ≤ limit at now against state w. It
// returns the next state (w itself when nothing is to be written) and the
// verdict. For the leaky bucket, the Delay of an admission is
// reset − c·T (the debt before it), which params.delay derives.
func (g *gcra) step(w uint64, now, c int64) (uint64, verdict) {
	base := max(tat(w), now) // a reading older than the state: no time has passed
	debt := base - now       // time until the bucket is full again
	if c == 0 {
		return w, verdict{ok: true, rem: g.remaining(debt), reset: debt}
	}
	next := base + c*g.t
	if next-now <= g.tau {
		return packTAT(next), verdict{ok: true, rem: g.remaining(next - now), reset: next - now}
	}
	// Denied: the request fits once TAT has drained to now+tau−c·T.
	return w, verdict{rem: g.remaining(debt), retry: next - g.tau - now, reset: debt}
}

// reserve is step for Wait: it admits cost c ≥ 1 at the earliest instant
// now+wait, provided wait ≤ maxWait, by pushing TAT past the burst. ok is
// false (and the state unchanged) when the wait is too long. For the leaky
// bucket, wait is the delay until the request's own turn starts.
func (g *gcra) reserve(w uint64, now, c, maxWait int64) (next uint64, wait int64, ok bool) {
	base := max(tat(w), now)
	n := base + c*g.t
	if n-now > maxReserve+g.tau {
		return w, 0, false
	}
	if g.leaky {
		// Its turn starts when everything queued ahead has left: at base,
		// which is never before the instant it would fit (n−tau ≤ base).
		wait = base - now
	} else {
		wait = max(0, n-g.tau-now)
	}
	if wait > maxWait {
		return w, wait, false
	}
	return packTAT(n), wait, true
}

// refund gives back what an admission that added the interval [from, end)
// to the TAT (its cost·T at its policy's rate) still owes at now: the part
// that has not drained, end − max(from, now). TAT moves back by that much,
// but never below now (a bucket is never fuller than full). See refund.go.
func (g *gcra) refund(w uint64, now, from, end int64) uint64 {
	owed := end - max(from, now)
	if owed <= 0 {
		return w
	}
	t := max(tat(w)-owed, now)
	if t >= tat(w) {
		return w
	}
	return packTAT(t)
}

// resetAfter returns how long until w is a fresh key's state; 0 means fresh.
func (g *gcra) resetAfter(w uint64, now int64) int64 { return max(0, tat(w)-now) }
