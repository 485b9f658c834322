package hotlimit

import (
	"testing"
	"unsafe"
)

func TestShardSize(t *testing.T) {
	var s shard
	if off := unsafe.Offsetof(s.mu); off != cacheLineSize {
		t.Errorf("shard.mu at offset %d, want %d (leading pad)", off, cacheLineSize)
	}
	end := unsafe.Offsetof(s.tab) + unsafe.Sizeof(s.tab)
	if end-cacheLineSize != shardFieldsSize {
		t.Errorf("shard fields take %d bytes, shardFieldsSize says %d", end-cacheLineSize, shardFieldsSize)
	}
	if sz := unsafe.Sizeof(s); sz%cacheLineSize != 0 || sz < end+cacheLineSize-shardFieldsSize {
		t.Errorf("unsafe.Sizeof(shard{}) = %d, want a multiple of %d", sz, cacheLineSize)
	}
	if sz := unsafe.Sizeof(slot{}); sz != 32 {
		t.Errorf("unsafe.Sizeof(slot{}) = %d, want 32", sz)
	}
}

// TestTableDeleteKeepsProbeRuns deletes entries in every order from a small
// table with forced collisions and checks every remaining key is found.
func TestTableDeleteKeepsProbeRuns(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		var tb table
		keys := map[string]uint64{}
		for i := range 12 {
			k := string(rune('a'+i)) + "-key-that-is-long-enough-for-the-arena"[:i*3%40]
			h := (seed*2654435761+uint64(i%3)*0x9E3779B97F4A7C15)<<32 | uint64(i%4)<<30 | 1
			keys[k] = h
			tb.insert(h, k)
		}
		order := 0
		for k, h := range keys {
			if order++; (order+int(seed))%2 == 0 {
				continue
			}
			i := tb.find(h, k)
			if i < 0 {
				t.Fatalf("seed %d: %q lost before delete", seed, k)
			}
			tb.deleteAt(i)
			delete(keys, k)
			for k2, h2 := range keys {
				if tb.find(h2, k2) < 0 {
					t.Fatalf("seed %d: %q lost after deleting %q", seed, k2, k)
				}
			}
		}
		if tb.count != len(keys) {
			t.Fatalf("count %d, want %d", tb.count, len(keys))
		}
		tb.maybeShrink()
		for k2, h2 := range keys {
			if tb.find(h2, k2) < 0 {
				t.Fatalf("seed %d: %q lost after shrink", seed, k2)
			}
		}
	}
}
