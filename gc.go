package hotlimit

import (
	"math/rand/v2"
	"time"
)

// Removing keys: the background sweeper and the WithMaxKeys bound.
//
// Protocol. Every reader holds its shard's read lock from the lookup of a
// key's slot to the end of its CAS on the slot's state word (shard.go). A
// key is removed only under the shard's write lock. So when the remover
// holds the write lock no reader is between lookup and CAS: a reader that
// found the slot has finished its CAS (and the remover sees its result), and
// a reader that comes later does not find the slot and takes the insert
// path, which also needs the write lock. No admission can land in a removed
// entry and be lost.
//
// Invariants:
//   - The sweeper removes an entry only if its state, read under the write
//     lock, is a fresh key's state at the sweep's instant S (resetAfter is
//     0): token bucket full, windows expired.
//   - Before removing anything as fresh at S, the remover raises sweptAt to
//     at least S; the insert path reads sweptAt under the same shard's write
//     lock and decides a re-created key at max(now, sweptAt). A state that
//     is fresh at S is fresh at every later instant, and a fresh entry
//     decides exactly as a new one at the same instant, so a sweep changes
//     no decision; the clamp covers a reading older than S (a goroutine
//     preempted between reading the clock and inserting, or a test clock
//     set back), which would otherwise see a fresh state where the removed
//     one still owed time.
//   - Eviction (WithMaxKeys) removes the entry closest to fresh (smallest
//     ResetAfter) among at least evictMin distinct entries sampled without
//     replacement, so a drained key survives while fresher ones exist.
//   - keys counts entries held plus insertions that have reserved room;
//     reservation happens before insertion and release after removal, so
//     Len() ≤ maxKeys at every instant.
//   - A sweep holds a shard's write lock for at most sweepChunk slots, so a
//     decision on that shard waits for microseconds, and decisions on other
//     shards not at all.

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
	now := l.now()
	l.raiseSweptAt(now)
	removed := 0
	for i := range l.shards {
		select {
		case <-stop:
			return removed
		default:
		}
		removed += l.sweepShard(&l.shards[i], now)
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

func (l *Limiter) sweepShard(s *shard, now int64) int {
	removed := 0
	for pos := 0; ; {
		s.mu.Lock()
		t := &s.tab
		n := 0
		for pos < len(t.slots) && n < sweepChunk {
			n++
			sl := &t.slots[pos]
			if sl.hash != 0 && l.resetAfter(sl.word.Load(), now) == 0 {
				t.deleteAt(pos) // a later entry may move into pos: look again
				removed++
				l.keys.Add(-1)
				s.swept.Add(1)
				continue
			}
			pos++
		}
		finished := pos >= len(t.slots)
		if finished {
			t.maybeShrink()
		}
		s.mu.Unlock()
		if finished {
			return removed
		}
	}
}

const (
	evictMin    = 4 // fewest distinct candidates compared
	evictSample = 8 // most candidates taken from one shard
)

type candidate struct {
	s     *shard
	idx   int
	hash  uint64
	score int64 // ResetAfter at the sampling instant
}

// evictOne removes the entry closest to fresh among a sample, to make room
// for a new key. It reports whether it found any entry to look at.
// Requires that no shard lock is held.
func (l *Limiter) evictOne(now int64) bool {
	var c [evictSample + evictMin]candidate
	n := 0
	nsh := len(l.shards)
	start := rand.IntN(nsh)
	for k := 0; k < nsh && n < evictMin; k++ {
		s := &l.shards[(start+k)&(nsh-1)]
		s.mu.RLock()
		t := &s.tab
		if t.count > 0 {
			ln := len(t.slots)
			i := rand.IntN(ln)
			for got, j := 0, 0; j < ln && got < evictSample; j++ {
				if sl := &t.slots[i]; sl.hash != 0 {
					c[n] = candidate{s: s, idx: i, hash: sl.hash, score: l.resetAfter(sl.word.Load(), now)}
					n++
					got++
				}
				if i++; i == ln {
					i = 0
				}
			}
		}
		s.mu.RUnlock()
	}
	if n == 0 {
		return false
	}
	best := 0
	for i := 1; i < n; i++ {
		if c[i].score < c[best].score {
			best = i
		}
	}
	b := c[best]
	b.s.mu.Lock()
	t := &b.s.tab
	if b.idx < len(t.slots) && t.slots[b.idx].hash == b.hash {
		if l.resetAfter(t.slots[b.idx].word.Load(), now) == 0 {
			l.raiseSweptAt(now)
			b.s.swept.Add(1)
		} else {
			b.s.evicted.Add(1)
		}
		t.deleteAt(b.idx)
		l.keys.Add(-1)
	}
	// Otherwise the table changed since sampling; the caller tries again.
	b.s.mu.Unlock()
	return true
}
