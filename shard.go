package hotlimit

import (
	"sync"
	"sync/atomic"
)

// The keyed table.
//
// A Limiter holds a power-of-two number of shards; a key's shard is the top
// bits of its hash, which is xxhash of the key mixed with a per-limiter
// random seed (see Limiter.hash). Each shard publishes an open-addressing
// hash table with linear probing over a flat []slot: no pointers, so the
// garbage collector never scans it, and a key of up to 15 bytes is stored
// inline in its slot, so a lookup costs one cache miss where
// map[string]*entry costs three (map group, key bytes, entry). Longer keys
// live in the table's byte arena. A slot is 32 bytes; the table grows by
// 1.5× above a load of 0.8, so it holds 40 to 60 bytes per key.
//
// The table protocol. Decisions take no lock: a decision loads the
// shard's table pointer, probes it and CASes the key's state word, and the
// only shared memory it writes is that word (and its goroutine's stripe of
// the decision counters, see tally.go). Everything that adds, removes or
// moves an entry serialises on the shard's mutex and never changes a
// published slot's identity. The other files cite these steps by number.
//
//  1. Insertion (lockSlotFirst, under the mutex): reserve room under
//     WithMaxKeys (keys), decide on the word Limiter.vacant gives (what
//     the entries removed as fresh may still owe at the reading: a
//     bucket's TAT sweptAt, a window word in sweptAt's window), take
//     the entry's incarnation (the shard's insertion count, inserted + 1),
//     fill an empty slot's key fields and word, and publish the slot by
//     storing its hash word (release; readers load the hash word first).
//  2. No published word is ever fresh before its inserter has decided on
//     it: an insertion for a request that consumes runs that request's
//     decision on the fresh word first and publishes the result, or, if it
//     refuses, publishes nothing. Safety needs exactly this, not an order
//     among deciders: a lock-free request whose reading is older than
//     sweptAt would decide a published fresh word at that reading, as if
//     the state removed before it had owed nothing. Requests that consume
//     nothing (peeks, give-backs, Reset) never insert. A concurrency
//     limit's word holds no time, so its insertion publishes 0.
//  3. Decision (decide, reserveAt, acquireAt): load the word once, compute
//     from that snapshot, CAS; a failed CAS reloads. A denial and a peek
//     never write. A word with deadBit set, or a probe that misses, sends
//     the request to the mutex, where it finds the key's live slot in the
//     current table or inserts it (step 1).
//  4. Retirement (retire, retireAs, under the mutex): a remover CASes the
//     word it judged, w, to w|deadBit (or, in one CAS, a last change and
//     deadBit). A retired word never changes again, so if a decision
//     changed w first the remover's CAS fails and nothing is removed, and
//     if the remover's CAS wins every later CAS on it fails and the writer
//     retries by step 3. The slot stays a tombstone: probe runs stay
//     intact, and no slot is ever reused.
//  5. Removal of a fresh entry (sweep, eviction of a fresh victim, a
//     give-back that leaves the state fresh): once the retiring CAS of a
//     word judged fresh at S has succeeded, and before releasing the mutex
//     (which re-creating the key takes, step 1), raise sweptAt to the
//     instant F ≤ S the word has been fresh from (params.freshFrom: a
//     bucket's TAT, the end of a window word's last counted window). A
//     fresh state stays fresh and decides as a new entry would at any
//     reading from F on, and step 1 decides a reading older than F as
//     owing until sweptAt ≥ F, so no removal lets a key admit more; for
//     the key with the latest F, and for every key at readings from
//     sweptAt on, it changes no decision (gc.go). Only a removal that
//     happened raises it: raised for a CAS that failed, it would decide
//     later new keys after their readings for no removed state.
//  6. Eviction (WithMaxKeys, gc.go): retire a sampled entry only if its
//     word still holds the value scored (step 4).
//  7. Reset: retire whatever the word holds (step 4; only decisions race
//     with it under the mutex, and they come before it). It raises
//     nothing: a re-created key is decided as any new key's first request
//     at its reading, also a reading older than the Reset (taken before
//     it, or a ManualClock set back below it).
//  8. Rebuild (grow, shrink, purge tombstones, SetPolicy's conversion):
//     build a new table, retire every live word of the old one by CAS
//     while copying its last value and its hash word (so its incarnation),
//     then publish the new table. Writers to the old table fail their CAS
//     and retry by step 3.
//  9. Give-back (refund.go): find the key's live slot and give back only
//     if it holds the admission's incarnation (shard.holds): an entry
//     removed by steps 4–7 and re-created has another one, an entry moved
//     by step 8 keeps its own. Then CAS as in step 3, reading the clock
//     after the word; a give-back that leaves the state fresh retires it
//     in the same CAS under the mutex (steps 4 and 5). A bucket's
//     give-back below later admissions renews the entry under the mutex:
//     it retires the slot (step 4) and inserts the key again, with the
//     word given back, under a new incarnation, which still honours the
//     earlier ones' give-backs from a floor (Renewals, below).
//
// Why not an RWMutex held across lookup and CAS: RLock and RUnlock are two
// atomic writes to a shared reader count, about 9 ns each on the 2-vCPU
// machines we measure on (an uncontended CAS costs the same), and a hot key
// on many cores then moves the shard's lock line as well as its own word.
// The bench module's RESULTS.md has the figures,
// https://github.com/hotlimit/hotlimit/blob/main/bench/RESULTS.md.

// cacheLineSize is the unit of padding in shard. 128, not 64: on x86 the
// adjacent-line prefetcher pulls lines in pairs, and arm64's big cores use
// 128-byte lines, so 64 would leave neighbours sharing traffic.
const cacheLineSize = 128

// shard is one stripe of the keyed table. Its two groups of fields are each separated
// from any other field by a full cache line of padding, so no two groups
// share a line however the array is aligned: the table pointer, read by
// every decision, and the writers' mutex and rare counters.
type shard struct {
	_   [cacheLineSize]byte
	tab atomic.Pointer[table] // written under mu
	_   [cacheLineSize]byte

	mu       sync.Mutex           // serialises insert, retire, rebuild
	swept    atomic.Uint64        // fresh entries removed (written under mu)
	evicted  atomic.Uint64        // non-fresh entries evicted (written under mu)
	inserted atomic.Uint64        // entries ever inserted, renewals too: the last incarnation (written under mu)
	renewals map[uint64]*renewals // by the incarnation of a renewed entry (guarded by mu; nil until one)
	renPeak  atomic.Int64         // the most renewals has held since it was made: MemStats (written under mu)
	_        [cacheLineSize]byte
}

// deadBit marks a retired state word. No live state uses it: GCRA times
// stay below 2^63 and the window words keep their index in bits 62 down.
const deadBit = 1 << 63

// slot is one table cell.
//
// The hash word holds the low 32 bits of the key's hash (bit 0 always set:
// see Limiter.hash) and, above them, the low 32 bits of the entry's
// incarnation: its shard's insertion count when it was inserted (see
// incarnation). The home slot needs only the low 32 bits, and keys are
// compared in full, so the upper half is free for it.
//
// Invariants:
//   - hash == 0 iff the slot was never filled; a stored hash is never 0.
//     hash is stored once, after k0, k1 and word.
//   - k0 and k1 never change after hash is stored. k1's top byte is the
//     key's length when ≤ 15 (the bytes are in k0 and the low 7 bytes of
//     k1, little-endian), or longKey, in which case k0 is the key's offset
//     in the table's arena and k1's low 32 bits its length.
//   - Once word has deadBit set it never changes again.
type slot struct {
	word atomic.Uint64
	hash atomic.Uint64
	k0   uint64
	k1   uint64
}

const (
	inlineKeyLen = 15
	longKey      = 0xFF
)

// packKey returns the inline form of a key of at most 15 bytes: its bytes
// little-endian in k0 and the low 7 bytes of k1, its length in k1's top
// byte. It reads the key with overlapping word loads straight from the
// string: copying it into a buffer and reloading words from that costs a
// store-forwarding stall on every lookup.
func packKey(key string) (k0, k1 uint64) {
	n := len(key)
	switch {
	case n >= 8:
		k0 = load64(key, 0)
		k1 = load64(key, n-8) >> ((16 - n) * 8) // bytes 8..n-1; n == 8 shifts by 64: 0
	case n >= 4:
		k0 = uint64(load32(key, 0)) | uint64(load32(key, n-4))<<((n-4)*8)
	case n > 0:
		k0 = uint64(key[0]) | uint64(key[n/2])<<(n/2*8) | uint64(key[n-1])<<((n-1)*8)
	}
	return k0, k1 | uint64(n)<<56
}

// load64 and load32 read little-endian words from s at i; the compiler
// turns each into one load.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func load32(s string, i int) uint32 {
	s = s[i : i+4]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// incarnation returns the incarnation of sl, a slot that s's table held
// live when the caller found it: the entry's insertion count (step 1),
// recovered from its low 32 bits as the latest count they fit.
func (s *shard) incarnation(sl *slot) uint64 {
	c := s.inserted.Load() // after the hash, which was published after it moved
	return c - uint64(uint32(c)-uint32(sl.hash.Load()>>32))
}

// holds reports whether sl, the live slot of a key found in s's table, is
// the entry of incarnation inc of that key (step 9). The key has one live
// entry at a time, and its entries' incarnations only grow, so an entry
// whose low 32 bits match inc's, while the shard has inserted fewer than
// 2^32 entries since inc, is inc's own.
func (s *shard) holds(sl *slot, inc uint64) bool {
	return uint32(sl.hash.Load()>>32) == uint32(inc) && s.inserted.Load()-inc < 1<<32
}

// Renewals.
//
// Picture a bucket's debt as its admissions' units stacked in TAT order,
// each admission holding the interval of time its CAS added, a unit
// draining when the clock passes it. A give-back removes what its
// admission still holds after now, and every unit stacked above moves
// down by as much. Those are other admissions', whose records (the
// interval each added, admission.from and to) then no longer say where
// their units are: once time has passed, one of them could give back
// units that have drained (A and B each take 2 of a Burst of 4, A is
// given back, the bucket refills and C takes 4; B's record would then let
// 2 more in).
//
// So a give-back that leaves units above its admission's (the TAT is past
// the end of its record, belowLater) renews the entry, under the mutex:
// it retires the entry's slot by a CAS from the word it gave back from
// (protocol step 4: a decision that changed the word first makes it try
// again) and inserts the key again with the word given back, in a new
// slot with a new incarnation; in between, decisions find no live slot
// and wait for the mutex (step 3). A slot's incarnation never changes, so
// an admission, which reads it after its CAS on the slot's word, gets the
// incarnation of the word it changed: before the renewal, its units were
// in the word the renewal judged and its record is of the old
// incarnation; after, they are on the new slot, above the give-back.
//
// A record of an earlier incarnation is not void: the entry keeps its
// latest renewals (maxRenewals), each with the incarnation it retired and
// the time it removed, [at, at+span): the top span of the time the record
// it gave back held, at = to − span. A give-back of a record replays the
// renewals since its incarnation, the first being the one that retired it:
// one that removed time below where the record now starts (at < from)
// moved it back by span; one above did not touch it. The times of two
// admissions never overlap, and their order in the stack is the order of
// their CASes, so the renewals since a record that lay above it gave back
// admissions made after it, whose own renewals are then all kept too: by
// induction from the newest, every record whose renewal is kept replays to
// exactly where its units are, and its give-back is as exact as one on
// top, in any order and at any instant. A renewal below it may come from a
// record taken from the floor (below), whose at is no later than where its
// time was: still below, and still moving it by span. So no key is left
// owing other than the exact stack of each admission's time would, while
// its records are that recent.
//
// A record older than the renewals kept takes a floor: every renewal
// removed time at or above its at, which is at or after now (what it
// removed lay after its record's start and after now), so an admission's
// units start no lower than its own from or the least at of the renewals
// since, whichever is lower. The entry folds the at of each renewal it
// drops into its floor (the least, for the records from its base
// incarnation on), and such a record is taken as starting at min(from,
// floor, the at of every renewal kept). Since x − max(x, now) only grows
// with x, a record that starts no later than its units owes no more than
// they still hold after now: no key is left owing less than the exact
// stack would, so no sequence of calls overspends. At one frozen instant
// every at is at least now, so those give-backs are exact too; after time
// has passed they can return less than their units hold (the rest stays
// owed until it drains). A floor a bucket's length or more behind now,
// from which nothing can be given back any more (unless SetPolicy
// shortened the bucket since), starts afresh from the next renewal
// dropped; older records then give nothing. The reference model,
// internal/refmodel, keeps the same renewals.

// maxRenewals is how many renewals of an entry its give-backs can look
// back through exactly (see Renewals).
const maxRenewals = 16

// renewals holds the latest renewals of an entry, oldest first, and a
// floor for the records older than them.
type renewals struct {
	n  int
	ev [maxRenewals]renewal
	// base and floor, when floored: a record of an incarnation from base
	// on, older than ev[0]'s, starts no earlier than floor or the at of a
	// renewal held, whichever is lowest (the renewals dropped since base
	// removed time from floor up).
	floored bool
	base    uint64
	floor   int64
}

// renewal is one renewal of an entry: the incarnation it retired, and
// where it removed time from the TAT, [at, at+span) (at no later than
// where that time was: see moved).
type renewal struct {
	inc      uint64
	at, span int64
}

// moved returns the interval of time [from, to) of an admission on
// incarnation inc, as the renewals since have moved it: back by what each
// removed below it, which is exact if each knew where it removed from,
// and otherwise no later than where it is. For a record older than the
// renewals held, it starts no later than the floor. ok is false for an
// older record still (or if inc is not one of the entry's).
func (r *renewals) moved(inc uint64, from, to int64) (int64, int64, bool) {
	for j := range r.n {
		if r.ev[j].inc != inc {
			continue
		}
		for _, e := range r.ev[j:r.n] {
			if e.at < from { // below it
				from -= e.span
				to -= e.span
			}
		}
		return from, to, true
	}
	if !r.floored || inc < r.base || r.n > 0 && inc >= r.ev[0].inc {
		return from, to, false
	}
	low := r.floor
	for _, e := range r.ev[:r.n] {
		low = min(low, e.at)
	}
	if from > low {
		to -= from - low
		from = low
	}
	return from, to, true
}

// add records a renewal at now that retired incarnation inc and removed
// [at, at+span). Past maxRenewals it drops the oldest into the floor,
// which starts afresh from it once the floor is a bucket's length tau or
// more behind now (nothing could be given back from it any more).
func (r *renewals) add(inc uint64, at, span, now, tau int64) {
	if r.n == maxRenewals {
		old := r.ev[0]
		if !r.floored || now-r.floor >= tau {
			r.floored, r.base, r.floor = true, old.inc, old.at
		} else {
			r.floor = min(r.floor, old.at)
		}
		r.n = copy(r.ev[:], r.ev[1:])
	}
	r.ev[r.n] = renewal{inc, at, span}
	r.n++
}

// honoured returns a as a give-back into sl, the key's live slot of s's
// table, must take it: a itself if sl holds its incarnation, or, if sl
// was renewed since, a with its interval moved as the renewals since
// moved it (see Renewals above). ok is false if sl owes a nothing: it is
// of another entry, or older than the renewals and floor sl keeps.
// Buckets only. Requires s.mu.
func (s *shard) honoured(sl *slot, a admission) (rec admission, ok bool) {
	if s.holds(sl, a.inc) {
		return a, true
	}
	r, ok := s.renewals[s.incarnation(sl)]
	if ok {
		a.from, a.to, ok = r.moved(a.inc, a.from, a.to)
	}
	return a, ok
}

// renew inserts key (hash h) into t, s's current table, with word w,
// which giving back rec (as honoured) at now left, under a new
// incarnation, and records the renewal: the caller has retired the key's
// slot, of incarnation inc, from word old, rec having lain below later
// admissions (see Renewals above). tau is the bucket's length. Requires
// s.mu and t.fits(key).
func (s *shard) renew(t *table, h uint64, key string, old, w uint64, inc uint64, rec admission, now, tau int64) {
	r := s.renewals[inc]
	if r == nil {
		r = new(renewals)
	}
	delete(s.renewals, inc)
	x := tat(old) - tat(w) // removed from the top of rec's time: [rec.to − x, rec.to)
	r.add(inc, rec.to-x, x, now, tau)
	if len(s.renewals) > 2*t.count+8 {
		s.pruneRenewals(t)
	}
	if s.renewals == nil {
		s.renewals = make(map[uint64]*renewals)
	}
	next := s.inserted.Add(1)
	s.renewals[next] = r
	if n := int64(len(s.renewals)); n > s.renPeak.Load() {
		s.renPeak.Store(n)
	}
	t.insert(h, key, w, next)
}

// pruneRenewals forgets the renewals of entries t, s's current table, no
// longer holds live: removed entries, whose records are void. A renewal
// prunes once the map holds more than twice the live entries (plus a
// few), and a sweep (gc.go) whenever the map is not empty, so the map
// never holds more than about twice the shard's peak of live keys, and
// once its keys are gone it goes with them. The new map is built without
// a size hint, so it is as large as its entries need and MemStats'
// estimate from its count holds. Requires s.mu.
func (s *shard) pruneRenewals(t *table) {
	var live map[uint64]*renewals
	for i := range t.slots {
		sl := &t.slots[i]
		if sl.hash.Load() == 0 || sl.word.Load()&deadBit != 0 {
			continue
		}
		inc := s.incarnation(sl)
		if r, ok := s.renewals[inc]; ok {
			if live == nil {
				live = make(map[uint64]*renewals)
			}
			live[inc] = r
		}
	}
	s.renewals = live
	s.renPeak.Store(int64(len(live)))
}

// table is an open-addressing, linear-probing hash table.
//
// Invariants:
//   - slots and arena (the slice headers) never change after the table is
//     published; readers use nothing else.
//   - used, count and tombs are guarded by the shard's mutex.
//   - count + tombs < len(slots), so a probe ends at an empty slot.
//   - Every filled slot sits in the probe run that starts at its home slot
//     with no empty slot between.
type table struct {
	slots []slot
	arena []byte  // long keys' bytes in [0, used)
	p     *params // the policy whose format the words are in

	used      int // arena bytes written
	deadBytes int // arena bytes of retired keys
	count     int // live entries
	tombs     int // retired entries still in slots
}

const minSlots = 8

func newTable(n, arena int, p *params) *table {
	t := &table{slots: make([]slot, n), p: p}
	if arena > 0 {
		t.arena = make([]byte, arena)
	}
	return t
}

// home returns the slot a hash starts probing at: Lemire's multiply-shift
// range reduction of the hash's low 32 bits (the shard index uses the top
// bits, so the two are independent).
func (t *table) home(h uint64) int {
	return int(uint64(uint32(h)) * uint64(len(t.slots)) >> 32)
}

func (t *table) keyEqual(s *slot, key string, k0, k1 uint64, inline bool) bool {
	if inline {
		return s.k0 == k0 && s.k1 == k1
	}
	if s.k1>>56 != longKey || int(uint32(s.k1)) != len(key) {
		return false
	}
	return string(t.arena[s.k0:s.k0+uint64(len(key))]) == key
}

// holdsKey reports whether s, a filled slot of t, holds key.
func (t *table) holdsKey(s *slot, key string) bool {
	var k0, k1 uint64
	inline := len(key) <= inlineKeyLen
	if inline {
		k0, k1 = packKey(key)
	}
	return t.keyEqual(s, key, k0, k1, inline)
}

// find returns key's live slot, or nil. It takes no lock: it may miss a
// slot being published or retired concurrently, which callers handle by
// retrying under the shard's mutex.
func (t *table) find(h uint64, key string) *slot {
	n := len(t.slots)
	var k0, k1 uint64
	inline := len(key) <= inlineKeyLen
	if inline {
		k0, k1 = packKey(key)
	}
	for i := t.home(h); ; {
		s := &t.slots[i]
		sh := s.hash.Load()
		if sh == 0 {
			return nil
		}
		if uint32(sh) == uint32(h) && t.keyEqual(s, key, k0, k1, inline) && s.word.Load()&deadBit == 0 {
			return s
		}
		if i++; i == n {
			i = 0
		}
	}
}

// fits reports whether key can be inserted without a rebuild.
func (t *table) fits(key string) bool {
	if (t.count+t.tombs+1)*5 > len(t.slots)*4 { // load above 0.8
		return false
	}
	return len(key) <= inlineKeyLen || t.used+len(key) <= len(t.arena)
}

// insert adds key, which must be absent, with state word w and
// incarnation inc, and publishes it. The key's bytes are copied. Requires
// the shard's mutex and fits(key).
func (t *table) insert(h uint64, key string, w uint64, inc uint64) *slot {
	var k0, k1 uint64
	if len(key) <= inlineKeyLen {
		k0, k1 = packKey(key)
	} else {
		k0 = uint64(t.used)
		k1 = longKey<<56 | uint64(len(key))
		t.used += copy(t.arena[t.used:], key)
	}
	n := len(t.slots)
	i := t.home(h)
	for t.slots[i].hash.Load() != 0 {
		if i++; i == n {
			i = 0
		}
	}
	s := &t.slots[i]
	s.k0, s.k1 = k0, k1
	s.word.Store(w)
	s.hash.Store(uint64(uint32(h)) | inc<<32) // publish
	t.count++
	return s
}

// retire turns s into a tombstone if its word still holds w. It reports
// whether it did. Requires the shard's mutex.
func (t *table) retire(s *slot, w uint64) bool { return t.retireAs(s, w, w) }

// retireAs is retire that leaves final (with deadBit) in the word: a last
// change and the retirement in one CAS.
func (t *table) retireAs(s *slot, w, final uint64) bool {
	if w&deadBit != 0 || !s.word.CompareAndSwap(w, final|deadBit) {
		return false
	}
	if s.k1>>56 == longKey {
		t.deadBytes += int(uint32(s.k1))
	}
	t.count--
	t.tombs++
	return true
}

// rebuilt returns a new table of n slots holding t's live entries, with an
// arena of at least arenaMin free bytes. It retires every live word of t
// as it copies it, so late writers to t fail their CAS and retry against
// the new table. Requires the shard's mutex; the caller publishes the
// result.
func (t *table) rebuilt(n, arenaMin int) *table { return t.converted(n, arenaMin, t.p, nil) }

// converted is rebuilt into a table for policy p, each live word passed
// through convert (nil: kept as it is).
func (t *table) converted(n, arenaMin int, p *params, convert func(uint64) uint64) *table {
	live := t.used - t.deadBytes
	arena := 0
	if live+arenaMin > 0 {
		arena = max(256, 2*(live+arenaMin))
	}
	nt := newTable(n, arena, p)
	for i := range t.slots {
		s := &t.slots[i]
		if s.hash.Load() == 0 {
			continue
		}
		var w uint64
		for {
			w = s.word.Load()
			if w&deadBit != 0 || s.word.CompareAndSwap(w, w|deadBit) {
				break
			}
		}
		if w&deadBit != 0 {
			continue // a tombstone: dropped
		}
		k0, k1 := s.k0, s.k1
		if k1>>56 == longKey {
			k0 = uint64(nt.used)
			nt.used += copy(nt.arena[nt.used:], t.arena[s.k0:s.k0+uint64(uint32(k1))])
		}
		j := nt.home(s.hash.Load())
		for nt.slots[j].hash.Load() != 0 {
			if j++; j == n {
				j = 0
			}
		}
		d := &nt.slots[j]
		d.k0, d.k1 = k0, k1
		if convert != nil {
			w = convert(w)
		}
		d.word.Store(w)
		d.hash.Store(s.hash.Load())
		nt.count++
	}
	return nt
}

// grown returns the table to insert key into: t itself if it fits, or a
// rebuilt table (1.5× larger when the live load demands it). Requires the
// shard's mutex.
func (t *table) grown(key string) *table {
	if t.fits(key) {
		return t
	}
	n := len(t.slots)
	if (t.count+1)*5 > n*4*3/4 { // live entries alone fill most of it: grow
		n = max(minSlots, n*3/2)
	}
	extra := 0
	if len(key) > inlineKeyLen {
		extra = len(key)
	}
	return t.rebuilt(n, extra)
}

// shrunk returns a smaller or purged table when t is mostly empty or
// mostly tombstones or dead arena bytes, or t itself. Requires the shard's
// mutex.
func (t *table) shrunk() *table {
	n := len(t.slots)
	switch {
	case n > minSlots && t.count*8 < n:
		return t.rebuilt(max(minSlots, t.count*2), 0)
	case t.tombs*4 > n:
		return t.rebuilt(n, 0)
	case t.deadBytes > 4096 && t.deadBytes*2 > t.used:
		return t.rebuilt(n, 0)
	}
	return t
}
