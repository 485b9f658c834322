package hotlimit

import (
	"math/rand/v2"
	"time"
)

// The idle-key collector (not Go's garbage collector): the background
// sweeper, which removes keys whose state is fresh, and eviction under the
// WithMaxKeys bound.
//
// Protocol: shard.go's steps 4 (retirement by CAS of the word judged, so
// no admission lands in a removed entry), 5 (sweptAt before a fresh entry
// goes) and 6 (eviction retires only the value it scored).
//
// Invariants:
//   - The sweeper removes an entry only if its state, as retired by the
//     CAS, is a fresh key's state at the sweep's instant S (resetAfter is
//     0): token bucket full, windows expired.
//   - Having removed an entry as fresh at S, and before releasing the
//     shard's mutex, the remover raises sweptAt to the instant F ≤ S the
//     state has been fresh from (shard.go, protocol step 5), and a key
//     with no entry is decided as owing until sweptAt (Limiter.vacant,
//     step 1: TAT sweptAt, or an empty window word in sweptAt's window),
//     by insertion and Check alike. A state that is fresh at F is fresh at
//     every later instant, and a fresh entry decides exactly as a new one
//     at the same instant, so at every reading from sweptAt on a sweep
//     changes no decision. A reading older than F (a goroutine preempted
//     between reading the clock and inserting, or a ManualClock set back
//     below what the removed key owed) finds the key owing until sweptAt,
//     which is exactly what it owed if its F is the latest, and more for
//     other keys: never an admission more than without the sweep, and
//     Check reports what Allow then does.
//   - Eviction (WithMaxKeys) removes the entry closest to fresh among
//     evictMin distinct live entries sampled uniformly without replacement
//     (see "Eviction's sample" below): the one whose removal gives back the
//     fewest units (Limit − Remaining), and among those the smallest
//     ResetAfter. So a drained key survives while fresher ones exist.
//     (ResetAfter alone is not enough: every key in the same fixed window
//     has the same ResetAfter, and a sliding log's drained key may have the
//     oldest instants.) It retires the entry only if its word still holds
//     the value scored.
//   - keys counts entries held plus insertions that have reserved room;
//     reservation happens before insertion and release after removal, so
//     Len() ≤ maxKeys at every instant. An eviction does not release its
//     entry's room: it passes to the insertion that evicted (evictOne), so
//     one insertion evicts one entry, never a second one because another
//     insertion took the room first.
//   - A sweep holds a shard's mutex for at most sweepChunk slots. Decisions
//     on existing keys never wait for it; only the insertion of a new key
//     into that shard waits, for microseconds.

// sweepChunk is how many slots the sweeper examines per lock hold.
const sweepChunk = 512

// sweepJudgedHook, when set (by tests only), runs between the sweep judging
// a word fresh and its retiring CAS: the window in which a lock-free writer
// can change the word.
var sweepJudgedHook func()

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
// removed. On a clock that never goes back it changes no decision. On a
// ManualClock set back below the instant F a removed key became fresh
// (its TAT, the end of its last counted window), a key with no entry is
// decided as owing until the latest such F (gc.go's invariants): exactly
// what the key with that F owed, possibly more for other keys, never an
// admission more than without the Sweep, and Check reports what Allow
// then does. A Sweep that removes nothing changes nothing at any reading.
// The background sweeper calls it every
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
	if !l.isSlidingLog() {
		l.refreshSlotsMax() // tables may have shrunk
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
		// began (see window.go on stale readings). Only a removal raises
		// sweptAt (shard.go, protocol step 5): raised here for nothing
		// removed, it would decide new keys after their readings, which a
		// clock set back below the sweep's reading then sees as owed.
		now := l.now()
		t := s.tab.Load()
		for n := 0; pos < len(t.slots) && n < sweepChunk; pos, n = pos+1, n+1 {
			sl := &t.slots[pos]
			if sl.hash.Load() == 0 {
				continue
			}
			// retire fails if a lock-free writer changed the word since
			// we read it. An admission leaves it no longer fresh; a
			// refund on an older reading may leave it fresh still, and
			// then the entry must go all the same, so judge the new word
			// again. Each retry follows another writer's successful CAS.
			for w := sl.word.Load(); w&deadBit == 0 && t.p.resetAfter(w, now) == 0; w = sl.word.Load() {
				if sweepJudgedHook != nil {
					sweepJudgedHook()
				}
				if t.retire(sl, w) {
					l.raiseSweptAt(t.p.freshFrom(w, now)) // before the mutex goes: shard.go, protocol step 5
					removed++
					l.keys.Add(-1)
					s.swept.Add(1)
					break
				}
			}
		}
		finished := pos >= len(t.slots)
		if finished {
			if nt := t.shrunk(); nt != t {
				l.publish(s, nt)
			}
			if len(s.renewals) > 0 {
				s.pruneRenewals(s.tab.Load()) // the renewals of removed entries go with them
			}
		}
		s.mu.Unlock()
		if finished {
			return removed
		}
	}
}

// evictMin is the number of distinct live entries an eviction compares
// (all of them when the limiter holds fewer).
const evictMin = 4

// Eviction's sample.
//
// Guarantee (table policies: the buckets, the windows, concurrency): an
// eviction compares a sample of m = min(evictMin, N) distinct live entries
// drawn uniformly at random without replacement from the N live entries of
// the whole limiter (every shard, whatever its tombstones and empty
// slots), and removes the one closest to fresh, ties broken uniformly at
// random. So an entry x that has A other entries at least as far from fresh
// as itself is removed by one eviction only if the other m−1 entries of the
// sample are among those A:
//
//	P(x evicted) ≤ C(A, m−1) / C(N, m)
//
// (and a factor 1/m smaller when those A tie with x, as drained keys do).
// So a key with fewer than m−1 others at least as drained (A < 3) is never
// evicted while the limiter holds m entries or more; with 16 drained keys
// among 1,000, an eviction removes one of them with probability
// C(16, 4)/C(1000, 4) ≈ 4.4e-8, about 0.04 over a million evictions.
// The sampling is exact for tables that do not change while they are
// drawn from; an entry that changes meanwhile is scored on the word read
// and retired only if its word still holds that value.
//
// How: rejection sampling over slots. A draw picks a shard uniformly and a
// slot index uniformly in [0, U), where U (slotsMax) is at least every
// published table's length; it is kept if the index is inside that
// shard's table, the slot is live and not drawn before. Every live slot is
// then equally likely on each draw (probability 1/(S·U)), whatever the
// shards' sizes. Draws cost S·U/N tries each on average; when that is
// large (few entries in many or large tables) a full scan keeps a uniform
// sample instead (reservoir sampling).
//
// The sliding log keeps its rings in per-stripe maps, which cannot be
// drawn from uniformly at a bounded cost: its sample is m distinct rings,
// each from a stripe drawn at random (see evictLog), so rings in sparse
// stripes are favoured; it breaks ties at random and re-scores a ring
// before removing it.

// A short sample.
//
// keys counts the entries held and the room reserved by insertions in
// flight, so a full limiter can hold fewer than min(evictMin, keys) live
// entries for a moment: with WithMaxKeys(2) holding one drained key, the
// other unit of room may be reserved by a new key not yet inserted.
// Evicting from such a sample would compare a drained key with fewer
// others than the guarantee above counts on (with itself alone, it would
// remove it), so eviction removes nothing then and reports that it found
// nothing: the caller yields and tries again, by which time the insertions
// in flight have become entries (they never wait for an eviction) or given
// their room back. Each entry in the sample was live when drawn; one
// evicted or moved since fails its retiring CAS. A limiter that is no
// longer full when an eviction starts evicts nothing: the room freed is
// the caller's to reserve. The concurrency limiter, which only ever
// removes an idle entry, keeps the short sample.

// maxTries bounds the draws of one rejection sample before it falls back
// to a scan.
const maxTries = 64 * evictMin

type candidate struct {
	s     *shard
	t     *table
	sl    *slot
	w     uint64 // the word scored
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
// is not empty, ties broken uniformly at random with rnd.
func closest[T any](c []T, scoreOf func(*T) score, rnd func(int) int) int {
	best, ties := 0, 1
	for i := 1; i < len(c); i++ {
		switch a, b := scoreOf(&c[i]), scoreOf(&c[best]); {
		case a.less(b):
			best, ties = i, 1
		case !b.less(a): // a tie: keep each of the tied with probability 1/ties
			if ties++; rnd(ties) == 0 {
				best = i
			}
		}
	}
	return best
}

func (p *params) scoreOf(v verdict) score { return score{p.limit - v.rem, v.reset} }

// raiseSlotsMax makes slotsMax at least n: call it when publishing a table
// of n slots.
func (l *Limiter) raiseSlotsMax(n int) {
	for {
		old := l.slotsMax.Load()
		if int64(n) <= old || l.slotsMax.CompareAndSwap(old, int64(n)) {
			return
		}
	}
}

// publish makes t shard s's table. Requires s.mu.
func (l *Limiter) publish(s *shard, t *table) {
	s.tab.Store(t)
	l.raiseSlotsMax(len(t.slots))
}

// refreshSlotsMax lowers slotsMax to the longest table's length, after
// sweeps have shrunk tables. A table published while it runs raises it
// again, and the second scan catches one published between the first scan
// and the store.
func (l *Limiter) refreshSlotsMax() {
	longest := func() int {
		n := 0
		for i := range l.shards {
			n = max(n, len(l.shards[i].tab.Load().slots))
		}
		return n
	}
	l.slotsMax.Store(int64(longest()))
	l.raiseSlotsMax(longest())
}

// sample fills c with min(len(c), live entries) distinct live entries
// drawn uniformly at random without replacement, scored at now, and
// returns how many; rnd(n) returns a uniform integer in [0, n).
func (l *Limiter) sample(c []candidate, now int64, rnd func(int) int) int {
	nsh, u := len(l.shards), int(l.slotsMax.Load())
	live := int(l.keys.Load())
	want := min(len(c), live)
	if want <= 0 {
		return 0
	}
	n := 0
	if int64(nsh)*int64(u) <= 32*int64(live) { // at most 32 tries per draw on average
		for tries := 0; n < want && tries < maxTries; tries++ {
			s := &l.shards[rnd(nsh)]
			t := s.tab.Load()
			j := rnd(u)
			if j >= len(t.slots) {
				continue
			}
			sl := &t.slots[j]
			if sl.hash.Load() == 0 || drawn(c[:n], t, sl) {
				continue
			}
			if w := sl.word.Load(); w&deadBit == 0 {
				_, v := t.p.step(w, now, 0)
				c[n] = candidate{s: s, t: t, sl: sl, w: w, score: t.p.scoreOf(v)}
				n++
			}
		}
		if n == want {
			return n
		}
	}
	// Sparse tables (or an unlucky run of draws): a uniform sample of every
	// live entry, by reservoir sampling over a full scan.
	n = 0
	seen := 0
	for i := range l.shards {
		s := &l.shards[i]
		t := s.tab.Load()
		for j := range t.slots {
			sl := &t.slots[j]
			if sl.hash.Load() == 0 {
				continue
			}
			w := sl.word.Load()
			if w&deadBit != 0 {
				continue
			}
			seen++
			k := n
			if n == len(c) {
				if k = rnd(seen); k >= len(c) {
					continue
				}
			} else {
				n++
			}
			_, v := t.p.step(w, now, 0)
			c[k] = candidate{s: s, t: t, sl: sl, w: w, score: t.p.scoreOf(v)}
		}
	}
	return n
}

// drawn reports whether sl, a slot of t, or another slot of the same key
// is among the candidates c. A rebuild copies a key's entry into a new
// table before it publishes it, and a renewal (shard.go) moves it to a
// new slot under another incarnation (so the hash words' upper halves
// differ), so draws that straddle either can find the same key twice:
// counted twice, a drained key would be compared with itself.
func drawn(c []candidate, t *table, sl *slot) bool {
	h := sl.hash.Load()
	for i := range c {
		if c[i].sl == sl || uint32(c[i].sl.hash.Load()) == uint32(h) && sameKey(c[i].t, c[i].sl, t, sl) {
			return true
		}
	}
	return false
}

// sameKey reports whether slot a of table ta and slot b of table tb hold
// the same key. Both must be filled.
func sameKey(ta *table, a *slot, tb *table, b *slot) bool {
	if a.k1 != b.k1 {
		return false // the length byte, and an inline key's last bytes
	}
	if a.k1>>56 != longKey {
		return a.k0 == b.k0
	}
	n := uint64(uint32(a.k1))
	return string(ta.arena[a.k0:a.k0+n]) == string(tb.arena[b.k0:b.k0+n])
}

// evictOne, for an insertion of key (hash h), removes the entry closest to fresh among a uniform sample of
// min(evictMin, live entries) distinct live entries, to make room for a new
// key (see the guarantee above). It reports whether it found any entry to
// look at (the caller tries again when it did but room is still short),
// and whether it removed one and kept its room for the caller (took): the
// caller then holds a reservation, as if tryReserveKey had succeeded, and
// no other insertion can take that room meanwhile (which would send the
// evicting insertion to evict again, a second entry for one insertion). An
// entry whose word changed since it was scored is left alone. If the
// sample holds key itself, inserted meanwhile by another request, it
// removes nothing and reports mine: the caller uses that entry. (Evicting
// it to insert the same key fresh would forget the admission just made
// there, which no order of the two requests explains.) Requires that no
// shard mutex is held.
func (l *Limiter) evictOne(now int64, h uint64, key string) (found, took, mine bool) {
	if l.isSlidingLog() {
		found, mine := l.evictLog(now, key)
		return found, false, mine
	}
	return l.evictFrom(now, rand.IntN, h, key)
}

func (l *Limiter) evictFrom(now int64, rnd func(int) int, h uint64, key string) (found, took, mine bool) {
	full := l.keys.Load()
	if full < l.maxKeys {
		return true, false, false // room was freed meanwhile: the caller reserves it
	}
	var c [evictMin]candidate
	n := l.sample(c[:], now, rnd)
	for i := range c[:n] {
		if uint32(c[i].sl.hash.Load()) == uint32(h) && c[i].t.holdsKey(c[i].sl, key) {
			return true, false, true
		}
	}
	if n == 0 || n < min(evictMin, int(full)) && l.kind != kindConcurrency {
		return false, false, false // a short sample: see "A short sample"
	}
	b := c[closest(c[:n], func(x *candidate) score { return x.score }, rnd)]
	if l.kind == kindConcurrency && b.score.used > 0 {
		return false, false, false // operations in flight: never evicted
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if b.s.tab.Load() != b.t {
		return true, false, false // rebuilt since sampling; the caller tries again
	}
	fresh := b.t.p.resetAfter(b.w, now) == 0
	if !b.t.retire(b.sl, b.w) { // only as scored: a changed word stays
		return true, false, false
	}
	// keys stays as it is: the entry's room becomes the caller's.
	if fresh {
		l.raiseSweptAt(b.t.p.freshFrom(b.w, now)) // before the mutex goes: shard.go, protocol step 5
		b.s.swept.Add(1)
	} else {
		b.s.evicted.Add(1)
	}
	return true, true, false
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
