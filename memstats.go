package hotlimit

import (
	"sync/atomic"
	"unsafe"
)

// MemStats are the heap bytes a limiter holds, by part. Each is a gauge:
// it goes down when keys go (a sweep, an eviction) and tables shrink.
type MemStats struct {
	// Tables is the keyed tables' slots: 32 bytes per slot, at a load
	// between 0.53 and 0.8, so 40 to 60 bytes per key (every policy but
	// the sliding log, which keeps one empty table per shard). It
	// includes the buckets' renewals (a map entry per key whose
	// give-back landed below later admissions: shard.go), estimated as
	// Logs' map entries are.
	Tables uint64
	// Arenas is the tables' arenas for keys longer than 15 bytes:
	// their capacity, used or not.
	Arenas uint64
	// Logs is the sliding log's state: per key a ring of Limit instants
	// (8·Limit bytes), the ring's header, a copy of the key and its
	// map entry. The map entries are an estimate: a Go map's capacity
	// is not visible, and it is taken as halfway between the least and
	// the most a map holding the shard's peak number of keys can have
	// (maps never shrink), so this part may be off by up to a third.
	Logs uint64
	// Fixed is what the limiter holds whatever its keys: the Limiter,
	// its shards (three 128-byte cache lines each, 256 shards by
	// default), its decision counters and its policy.
	Fixed uint64
	// Total is the sum of the parts.
	Total uint64
}

// MemStats returns the heap bytes l holds. Allocations are counted at the
// size the allocator rounds them to (its size class). A table being
// replaced and a decision's transient memory are not counted. It takes no
// lock and reads each shard once: cheap enough for every scrape.
func (l *Limiter) MemStats() MemStats {
	var m MemStats
	m.Fixed = uint64(unsafe.Sizeof(Limiter{})) +
		uint64(len(l.shards))*uint64(unsafe.Sizeof(shard{})) +
		uint64(len(l.logs))*uint64(unsafe.Sizeof(logShard{})) +
		allocSize(len(l.tally.stripes)*int(unsafe.Sizeof(tallyStripe{}))) +
		allocSize(int(unsafe.Sizeof(params{})))
	for i := range l.shards {
		t := l.shards[i].tab.Load()
		m.Tables += allocSize(int(unsafe.Sizeof(table{}))) + allocSize(len(t.slots)*int(unsafe.Sizeof(slot{})))
		m.Tables += renewalBytes(l.shards[i].renPeak.Load())
		if len(t.arena) > 0 {
			m.Arenas += allocSize(len(t.arena))
		}
	}
	for i := range l.logs {
		ls := &l.logs[i]
		m.Logs += uint64(max(0, ls.ringBytes.Load())) + mapBytes(ls.peak.Load(), unsafe.Sizeof(""), unsafe.Sizeof((*logRing)(nil)))
	}
	m.Total = m.Tables + m.Arenas + m.Logs + m.Fixed
	return m
}

// MemStats returns the heap bytes the limiter holds; see Limiter.MemStats.
func (c *ConcurrencyLimiter) MemStats() MemStats { return c.l.MemStats() }

// allocSize returns the bytes the allocator reserves for a pointer-free
// object of n bytes: n rounded up to its size class up to 32 KiB, to
// whole 8 KiB pages above. The classes are the runtime's own, learned
// once per 8-byte step through append, which grows a slice's capacity to
// the size class of its allocation.
func allocSize(n int) uint64 {
	switch {
	case n <= 0:
		return 0
	case n > maxSmallSize:
		return uint64(n+8191) &^ 8191
	}
	i := (n + 7) / 8 // every size class is a multiple of 8
	if c := sizeClasses[i].Load(); c != 0 {
		return uint64(c)
	}
	c := uint32(cap(append([]byte(nil), make([]byte, 8*i)...)))
	sizeClasses[i].Store(c)
	return uint64(c)
}

// maxSmallSize is the largest object the allocator rounds to a size
// class rather than to pages.
const maxSmallSize = 32 << 10

// sizeClasses[i] caches allocSize(8·i); 0 until learned.
var sizeClasses [maxSmallSize/8 + 1]atomic.Uint32

// ringBytes is what one sliding-log key costs besides its map entry: the
// ring's header, its instants and the copy of the key.
func ringBytes(keyLen, instants int) int64 {
	return int64(allocSize(int(unsafe.Sizeof(logRing{}))) + allocSize(8*instants) + allocSize(keyLen))
}

// renewalBytes estimates the memory of a shard's renewals that has held
// at most peak entries: its map, and each entry's renewals.
func renewalBytes(peak int64) uint64 {
	if peak <= 0 {
		return 0
	}
	return mapBytes(peak, unsafe.Sizeof(uint64(0)), unsafe.Sizeof((*renewals)(nil))) + uint64(peak)*allocSize(int(unsafe.Sizeof(renewals{})))
}

// mapBytes estimates the memory of a map with keys of keySize and values
// of valSize bytes that has held at most peak keys. A Go map stores 8
// slots of a key and a value behind 8 control bytes per group, fills its
// tables to at most 7/8 and doubles them when full, so it has between 8/7
// and 16/7 slots per key: the estimate takes 12/7.
func mapBytes(peak int64, keySize, valSize uintptr) uint64 {
	if peak <= 0 {
		return 0
	}
	return uint64(peak) * 12 / 7 * (uint64(keySize) + uint64(valSize) + 1)
}
