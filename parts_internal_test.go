package hotlimit

import (
	"testing"
	"time"
)

// BenchmarkParts times the pieces of one decision on one existing key, so
// that the bench module's RESULTS.md (https://github.com/hotlimit/hotlimit/blob/main/bench/RESULTS.md)
// can say where a decision's time goes. Every part
// but "clock=default" and "AllowN/clock=default" runs on the coarse clock.
func BenchmarkParts(b *testing.B) {
	l, _ := New(TokenBucket{Rate: Rate{N: 1_000_000_000, Per: time.Second}, Burst: 1_000_000_000}, WithSweepInterval(0), WithCoarseClock(time.Millisecond))
	defer l.Close()
	key := "user:123456"
	l.Allow(key)
	h := l.hash(key)
	s := l.shardOf(h)
	sl := s.tab.Load().find(h, key)
	var sink uint64
	b.Run("clock=default", func(b *testing.B) {
		for b.Loop() {
			sink += uint64(systemNow())
		}
	})
	b.Run("hash", func(b *testing.B) {
		for b.Loop() {
			sink += l.hash(key)
		}
	})
	b.Run("find", func(b *testing.B) {
		for b.Loop() {
			if s.tab.Load().find(h, key) == nil {
				b.Fatal()
			}
		}
	})
	b.Run("decide", func(b *testing.B) {
		for b.Loop() {
			v, _, _ := l.decide(s.tab.Load().p, &sl.word, l.now(), 1)
			sink += uint64(v.rem)
		}
	})
	b.Run("count", func(b *testing.B) {
		for b.Loop() {
			l.tally.count(true)
		}
	})
	b.Run("AllowN", func(b *testing.B) {
		for b.Loop() {
			l.AllowN(key, 1)
		}
	})
	def, _ := New(TokenBucket{Rate: Rate{N: 1_000_000_000, Per: time.Second}, Burst: 1_000_000_000}, WithSweepInterval(0))
	defer def.Close()
	def.Allow(key)
	b.Run("AllowN/clock=default", func(b *testing.B) {
		for b.Loop() {
			def.AllowN(key, 1)
		}
	})
	_ = sink
}
