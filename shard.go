package hotlimit

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// The keyed table.
//
// A Limiter holds a power-of-two number of shards; a key's shard is the top
// bits of its hash, which is xxhash of the key mixed with a per-limiter
// random seed (see Limiter.hash). Each shard is an open-addressing hash
// table with linear probing over a flat []slot: no pointers, so the garbage
// collector never scans it, and a key of up to 15 bytes is stored inline in
// its slot, so a lookup costs one cache miss where map[string]*entry costs
// three (map group, key bytes, entry). Longer keys live in a per-shard byte
// arena. A slot is 32 bytes; the table grows by 1.5× above a load of 0.8,
// so it holds 40 to 60 bytes per key.
//
// Locking: readers hold the shard's read lock across lookup and the CAS on
// the key's state word; inserts, deletes and rebuilds take the write lock.
// That is what makes deletion safe (invariant 2 of DESIGN.md): a key is
// removed only under the write lock, when no reader can be between finding
// its slot and updating it, so no admission can land in a removed entry.
//
// The cost is that the read path writes one shared word besides the key's
// state (RWMutex.RLock/RUnlock update the reader count), so a hot key on
// many cores moves two cache lines instead of one. We measured this
// (bench/RESULTS.md, -cpu 1,2,4,8): on a hot key the state word's own
// CAS contention dominates, and the alternatives (a lock-free table with
// tombstones and RCU resizing) need per-slot retire states and move
// protocols that a shared reference suite has not yet exercised. We keep the
// read lock until a measured gain justifies that complexity.

// cacheLineSize is the unit of padding between shards. 128, not 64: on
// x86 the adjacent-line prefetcher pulls lines in pairs, and arm64's big
// cores use 128-byte lines, so 64 would leave neighbours sharing traffic.
const cacheLineSize = 128

// shard is one lock stripe. Its hot fields are preceded by a full cache
// line of padding and followed by enough to round the struct up, so no two
// shards' fields share a line however the array is aligned.
type shard struct {
	_ [cacheLineSize]byte

	mu      sync.RWMutex
	allowed atomic.Uint64 // admissions decided in this shard
	denied  atomic.Uint64 // denials decided in this shard
	swept   atomic.Uint64 // fresh entries removed (written under mu)
	evicted atomic.Uint64 // non-fresh entries evicted (written under mu)
	tab     table         // guarded by mu

	_ [cacheLineSize - shardFieldsSize]byte
}

// shardFieldsSize is the size of shard's fields after the leading pad,
// checked by TestShardSize.
const shardFieldsSize = 24 + 4*8 + 64

// slot is one table cell.
//
// Invariants:
//   - hash == 0 iff the slot is empty; a stored hash is never 0 (see
//     Limiter.hash).
//   - k1's top byte is the key's length when ≤ 15 (the bytes are in k0 and
//     the low 7 bytes of k1, little-endian), or longKey, in which case k0 is
//     the key's offset in the shard's arena and k1's low 32 bits its length.
//   - word is read and CASed only under the shard's read or write lock, and
//     moved (deletion, rebuild) only under the write lock.
type slot struct {
	word atomic.Uint64
	hash uint64
	k0   uint64
	k1   uint64
}

const (
	inlineKeyLen = 15
	longKey      = 0xFF
)

// packKey returns the inline form of a key of at most 15 bytes.
func packKey(key string) (k0, k1 uint64) {
	var b [16]byte
	copy(b[:15], key)
	b[15] = byte(len(key))
	return binary.LittleEndian.Uint64(b[0:8]), binary.LittleEndian.Uint64(b[8:16])
}

// table is an open-addressing, linear-probing hash table.
//
// Invariants (all under the shard's write lock, read under its read lock):
//   - 0 ≤ count < len(slots) whenever len(slots) > 0, so a probe ends.
//   - Every entry sits in the probe run that starts at its home slot
//     home(hash) with no empty slot between (backward-shift deletion keeps
//     this without tombstones).
//   - arena holds the bytes of long keys; dead counts bytes of deleted ones.
type table struct {
	slots []slot
	count int
	arena []byte
	dead  int
}

const minSlots = 8

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

// find returns the index of key's slot, or -1. Requires the read lock.
func (t *table) find(h uint64, key string) int {
	n := len(t.slots)
	if n == 0 {
		return -1
	}
	var k0, k1 uint64
	inline := len(key) <= inlineKeyLen
	if inline {
		k0, k1 = packKey(key)
	}
	for i := t.home(h); ; {
		s := &t.slots[i]
		if s.hash == 0 {
			return -1
		}
		if s.hash == h && t.keyEqual(s, key, k0, k1, inline) {
			return i
		}
		if i++; i == n {
			i = 0
		}
	}
}

// insert adds key, which must be absent, with state word 0 and returns
// its index. The key's bytes are copied. Requires the write lock.
func (t *table) insert(h uint64, key string) int {
	if (t.count+1)*5 > len(t.slots)*4 { // load above 0.8
		t.rebuild(max(minSlots, len(t.slots)*3/2))
	}
	var k0, k1 uint64
	if len(key) <= inlineKeyLen {
		k0, k1 = packKey(key)
	} else {
		k0 = uint64(len(t.arena))
		k1 = longKey<<56 | uint64(len(key))
		t.arena = append(t.arena, key...)
	}
	n := len(t.slots)
	i := t.home(h)
	for t.slots[i].hash != 0 {
		if i++; i == n {
			i = 0
		}
	}
	s := &t.slots[i]
	s.hash, s.k0, s.k1 = h, k0, k1
	s.word.Store(0)
	t.count++
	return i
}

// deleteAt removes the entry in slot i by backward-shift deletion: later
// entries of the same probe run move back into the hole, so lookups need no
// tombstones. Requires the write lock.
func (t *table) deleteAt(i int) {
	n := len(t.slots)
	if s := &t.slots[i]; s.k1>>56 == longKey {
		t.dead += int(uint32(s.k1))
	}
	for j := i; ; {
		if j++; j == n {
			j = 0
		}
		s := &t.slots[j]
		if s.hash == 0 {
			break
		}
		// s may fill the hole at i iff its home is not in (i, j] cyclically.
		h := t.home(s.hash)
		if (i <= j && (h <= i || h > j)) || (i > j && h <= i && h > j) {
			d := &t.slots[i]
			d.hash, d.k0, d.k1 = s.hash, s.k0, s.k1
			d.word.Store(s.word.Load())
			i = j
		}
	}
	e := &t.slots[i]
	e.hash, e.k0, e.k1 = 0, 0, 0
	e.word.Store(0)
	t.count--
}

// rebuild rehashes every entry into a table of n slots and compacts the
// arena. Requires the write lock.
func (t *table) rebuild(n int) {
	old, oldArena := t.slots, t.arena
	t.slots = make([]slot, n)
	t.arena = nil
	if live := len(oldArena) - t.dead; live > 0 {
		t.arena = make([]byte, 0, live)
	}
	t.dead = 0
	for i := range old {
		s := &old[i]
		if s.hash == 0 {
			continue
		}
		k0, k1 := s.k0, s.k1
		if k1>>56 == longKey {
			k0 = uint64(len(t.arena))
			t.arena = append(t.arena, oldArena[s.k0:s.k0+uint64(uint32(k1))]...)
		}
		j := t.home(s.hash)
		for t.slots[j].hash != 0 {
			if j++; j == n {
				j = 0
			}
		}
		d := &t.slots[j]
		d.hash, d.k0, d.k1 = s.hash, k0, k1
		d.word.Store(s.word.Load())
	}
}

// maybeShrink rebuilds a table that has become mostly empty, and compacts
// an arena that is mostly dead, so memory returns after a burst of keys
// goes idle. Requires the write lock.
func (t *table) maybeShrink() {
	n := len(t.slots)
	switch {
	case n > minSlots && t.count*8 < n:
		t.rebuild(max(minSlots, t.count*2))
	case t.dead > 4096 && t.dead*2 > len(t.arena):
		t.rebuild(n)
	}
}
