package hotlimit

import (
	"fmt"
	"testing"
	"unsafe"
)

// TestShardLayout checks that each group of shard fields has a cache line
// to itself, whatever the alignment of the shard array.
func TestShardLayout(t *testing.T) {
	var s shard
	groups := []struct {
		name       string
		start, end uintptr
	}{
		{"tab", unsafe.Offsetof(s.tab), unsafe.Offsetof(s.tab) + unsafe.Sizeof(s.tab)},
		{"mu..evicted", unsafe.Offsetof(s.mu), unsafe.Offsetof(s.evicted) + 8},
	}
	prevEnd := uintptr(0) // the previous shard's last field ends before us
	for _, g := range groups {
		if g.start-prevEnd < cacheLineSize {
			t.Errorf("%s starts %d bytes after the previous group; want ≥ %d", g.name, g.start-prevEnd, cacheLineSize)
		}
		prevEnd = g.end
	}
	if sz := unsafe.Sizeof(s); sz-prevEnd < cacheLineSize {
		t.Errorf("unsafe.Sizeof(shard{}) = %d, last group ends at %d", sz, prevEnd)
	}
	if sz := unsafe.Sizeof(slot{}); sz != 32 {
		t.Errorf("unsafe.Sizeof(slot{}) = %d, want 32", sz)
	}
}

// TestTableRetireRebuild retires entries in varied orders from tables with
// forced collisions and long keys, rebuilding as a shard would, and checks
// that every live key is found and no retired one is.
func TestTableRetireRebuild(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		tb := newTable(minSlots, 0, nil)
		keys := map[string]uint64{}
		for i := range 40 {
			k := fmt.Sprintf("%c%s", 'a'+i%26, "-key-that-is-long-enough-for-the-arena"[:i*7%38])
			if _, dup := keys[k]; dup {
				continue
			}
			h := (seed*2654435761+uint64(i%3)*0x9E3779B97F4A7C15)<<32 | uint64(i%4)<<30 | 1
			keys[k] = h
			tb = tb.grown(k)
			tb.insert(h, k, 0, uint64(i+1)).word.Store(uint64(i + 1))
		}
		order := 0
		for k, h := range keys {
			if order++; (order+int(seed))%3 == 0 {
				continue
			}
			s := tb.find(h, k)
			if s == nil {
				t.Fatalf("seed %d: %q lost before retire", seed, k)
			}
			if !tb.retire(s, s.word.Load()) {
				t.Fatalf("seed %d: retire failed", seed)
			}
			if tb.find(h, k) != nil {
				t.Fatalf("seed %d: retired %q still found", seed, k)
			}
			delete(keys, k)
			if order%5 == 0 {
				tb = tb.shrunk()
			}
			for k2, h2 := range keys {
				if tb.find(h2, k2) == nil {
					t.Fatalf("seed %d: %q lost after retiring %q", seed, k2, k)
				}
			}
		}
		if tb.count != len(keys) {
			t.Fatalf("count %d, want %d", tb.count, len(keys))
		}
		old := tb
		tb = tb.rebuilt(len(tb.slots), 0)
		for k2, h2 := range keys {
			if tb.find(h2, k2) == nil || old.find(h2, k2) != nil {
				t.Fatalf("seed %d: %q: after rebuild new table must find it, old must not", seed, k2)
			}
		}
	}
}

// TestPackKey compares packKey with the obvious byte-by-byte packing for
// every length it handles.
func TestPackKey(t *testing.T) {
	src := "abcdefghijklmnopq"
	seen := map[[2]uint64]string{}
	for n := 0; n <= inlineKeyLen; n++ {
		for off := 0; off+n <= len(src); off++ {
			key := src[off : off+n]
			var b [16]byte
			copy(b[:], key)
			b[15] = byte(n)
			var w0, w1 uint64
			for i := 7; i >= 0; i-- {
				w0 = w0<<8 | uint64(b[i])
				w1 = w1<<8 | uint64(b[8+i])
			}
			k0, k1 := packKey(key)
			if k0 != w0 || k1 != w1 {
				t.Fatalf("packKey(%q) = %#x %#x, want %#x %#x", key, k0, k1, w0, w1)
			}
			if other, dup := seen[[2]uint64{k0, k1}]; dup && other != key {
				t.Fatalf("packKey(%q) == packKey(%q)", key, other)
			}
			seen[[2]uint64{k0, k1}] = key
		}
	}
}
