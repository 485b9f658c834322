package hotlimit

import (
	"math/rand/v2"
	"time"
)

// The idle-key collector (not Go's garbage collector): the background
// sweeper, which removes keys whose state is fresh, and eviction under the
// WithMaxKeys bound.
//
// Protocol: tombstones (shard.go). Decisions take no lock; they CAS a
// key's state word. A remover, holding the shard's mutex, reads the word w,
// judges it, and CASes w to w|deadBit. If a decision changed the word in
// between, the remover's CAS fails and nothing is removed. If the remover's
// CAS wins, every later CAS on that word fails (a retired word never changes
// again), and the decision retries under the shard's mutex, where it no
// longer finds the retired slot and inserts a fresh entry. So no admission
// can land in a removed entry and be lost.
//
// Invariants:
//   - The sweeper removes an entry only if its state, as retired by the
//     CAS, is a fresh key's state at the sweep's instant S (resetAfter is
//     0): token bucket full, windows expired.
//   - Before removing anything as fresh at S, the remover raises sweptAt to
//     at least S, and to the start of a window word's window when that is
//     later than S (a word written on a later reading than the remover's:
//     see window.go); the insert path reads sweptAt under the same shard's
//     write mutex and decides a re-created key at max(now, sweptAt). A state that
//     is fresh at S is fresh at every later instant, and a fresh entry
//     decides exactly as a new one at the same instant, so a sweep changes
//     no decision; the clamp covers a reading older than S (a goroutine
//     preempted between reading the clock and inserting, or a test clock
//     set back), which would otherwise see a fresh state where the removed
//     one still owed time.
//   - Eviction (WithMaxKeys) removes the entry closest to fresh among at
//     least evictMin distinct entries sampled without replacement: the one
//     whose removal gives back the fewest units (Limit − Remaining), and
//     among those the smallest ResetAfter. So a drained key survives while
//     fresher ones exist. (ResetAfter alone is not enough: every key in
//     the same fixed window has the same ResetAfter, and a sliding log's
//     drained key may have the oldest instants.)
//   - keys counts entries held plus insertions that have reserved room;
//     reservation happens before insertion and release after removal, so
//     Len() ≤ maxKeys at every instant.
//   - A sweep holds a shard's mutex for at most sweepChunk slots. Decisions
//     on existing keys never wait for it; only the insertion of a new key
//     into that shard waits, for microseconds.

// sweepChunk is how many slots the sweeper examines per lock hold.
const sweepChunk = 512

func (l *Limiter) sweepLoop() {
	defer close(l.done)
	t := time.NewTicker(l.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.sweep(l.stop)
		}
	}
}

// Sweep removes every key whose state is fresh now and returns how many it
// removed. It changes no decision. The background sweeper calls it every
// WithSweepInterval; call it yourself when the sweeper is disabled.
func (l *Limiter) Sweep() int { return l.sweep(nil) }

func (l *Limiter) sweep(stop <-chan struct{}) int {
	removed := 0
	for i := range l.shards {
		select {
		case <-stop:
			return removed
		default:
		}
		if l.isSlidingLog() {
			removed += l.sweepLogShard(i)
		} else {
			removed += l.sweepShard(&l.shards[i])
		}
	}
	return removed
}

// raiseSweptAt makes sweptAt at least t.
func (l *Limiter) raiseSweptAt(t int64) {
	for {
		old := l.sweptAt.Load()
		if t <= old || l.sweptAt.CompareAndSwap(old, t) {
			return
		}
	}
}

func (l *Limiter) sweepShard(s *shard) int {
	removed := 0
	for pos := 0; ; {
		s.mu.Lock()
		// Read the clock with the mutex held, for each chunk, so the
		// reading is never older than a state written before this chunk
		// began (see window.go on stale readings).
		now := l.now()
		l.raiseSweptAt(now)
		t := s.tab.Load()
		for n := 0; pos < len(t.slots) && n < sweepChunk; pos, n = pos+1, n+1 {
			sl := &t.slots[pos]
			if sl.hash.Load() == 0 {
				continue
			}
			// retire fails if a decision changed the word since we read
			// it: the key is then no longer fresh, or will be next time.
			w := sl.word.Load()
			if w&deadBit != 0 || t.p.resetAfter(w, now) != 0 {
				continue
			}
			l.raiseSweptAt(t.p.judgedAt(w, now)) // a window word newer than now: its window's start
			if t.retire(sl, w) {
				removed++
				l.keys.Add(-1)
				s.swept.Add(1)
			}
		}
		finished := pos >= len(t.slots)
		if finished {
			if nt := t.shrunk(); nt != t {
				s.tab.Store(nt)
			}
		}
		s.mu.Unlock()
		if finished {
			return removed
		}
	}
}

const (
	evictMin    = 4  // fewest distinct candidates compared
	evictSample = 8  // most candidates taken from one shard
	evictScan   = 64 // most slots scanned per shard while sampling
)

type candidate struct {
	s     *shard
	t     *table
	sl    *slot
	score score
}

// score is how far from fresh an entry is at the sampling instant.
type score struct {
	used  int64 // units its removal would give back: Limit − Remaining
	reset int64 // ResetAfter
}

func (a score) less(b score) bool {
	return a.used < b.used || a.used == b.used && a.reset < b.reset
}

// closest returns the index of the candidate closest to fresh in c, which
// is not empty.
func closest[T any](c []T, scoreOf func(*T) score) int {
	best := 0
	for i := 1; i < len(c); i++ {
		if scoreOf(&c[i]).less(scoreOf(&c[best])) {
			best = i
		}
	}
	return best
}

func (p *params) scoreOf(v verdict) score { return score{p.limit - v.rem, v.reset} }

// evictOne removes the entry closest to fresh among a sample of at least
// evictMin distinct live entries (fewer only if the limiter holds fewer),
// to make room for a new key. It reports whether it found any entry to look
// at. Requires that no shard mutex is held.
func (l *Limiter) evictOne(now int64) bool {
	if l.isSlidingLog() {
		return l.evictLog(now)
	}
	var c [evictSample + evictMin]candidate
	n := 0
	nsh := len(l.shards)
	start := rand.IntN(nsh)
	for k := 0; k < nsh && n < evictMin; k++ {
		s := &l.shards[(start+k)&(nsh-1)]
		t := s.tab.Load()
		ln := len(t.slots)
		i := rand.IntN(ln)
		for got, j := 0, 0; j < min(ln, evictScan) && got < evictSample; j++ {
			sl := &t.slots[i]
			if sl.hash.Load() != 0 {
				if w := sl.word.Load(); w&deadBit == 0 {
					_, v := t.p.step(w, now, 0)
					c[n] = candidate{s: s, t: t, sl: sl, score: t.p.scoreOf(v)}
					n++
					got++
				}
			}
			if i++; i == ln {
				i = 0
			}
		}
	}
	if n == 0 {
		return false
	}
	b := c[closest(c[:n], func(x *candidate) score { return x.score })]
	if l.kind == kindConcurrency && b.score.used > 0 {
		return false // operations in flight: never evicted
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if b.s.tab.Load() != b.t {
		return true // rebuilt since sampling; the caller tries again
	}
	w := b.sl.word.Load()
	fresh := w&deadBit == 0 && b.t.p.resetAfter(w, now) == 0
	if !fresh && l.kind == kindConcurrency {
		return true // an operation started since sampling; never evicted
	}
	if fresh {
		l.raiseSweptAt(b.t.p.judgedAt(w, now)) // before the entry goes: see the invariants
	}
	if b.t.retire(b.sl, w) {
		l.keys.Add(-1)
		if fresh {
			b.s.swept.Add(1)
		} else {
			b.s.evicted.Add(1)
		}
	}
	return true
}

// evictIdle removes one entry of a concurrency limiter that has nothing in
// flight, looking at every entry (from a random shard on), and reports
// whether it found one. A blocking AcquireN uses it when the sample the
// reservation looks at held no idle entry, so that an idle entry anywhere
// is room for its key. It holds one shard's mutex at a time. Requires that
// no shard mutex is held.
func (l *Limiter) evictIdle() bool {
	nsh := len(l.shards)
	start := rand.IntN(nsh)
	for k := range nsh {
		s := &l.shards[(start+k)&(nsh-1)]
		s.mu.Lock()
		t := s.tab.Load()
		for i := range t.slots {
			if sl := &t.slots[i]; sl.hash.Load() != 0 && sl.word.Load() == 0 && t.retire(sl, 0) {
				l.keys.Add(-1)
				s.swept.Add(1)
				s.mu.Unlock()
				return true
			}
		}
		s.mu.Unlock()
	}
	return false
}
