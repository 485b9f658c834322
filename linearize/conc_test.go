package linearize

import (
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/hotlimit/hotlimit"
)

// hookClock calls f with the ordinal of each read, before returning 0.
type hookClock struct {
	reads int
	f     func(read int)
}

func (c *hookClock) Now() time.Duration {
	c.reads++
	if c.f != nil {
		c.f(c.reads)
	}
	return 0
}

// sweepHistory runs, on c, one history where a Sweep overlaps a release
// and an acquisition: key a is held, key b is idle; the sweep examines a,
// then, at the clock read of the lock hold that examines b, a's permit is
// released and b acquired. The sweep reads the clock once per lock hold,
// and a key is examined in the hold of the first read after which it is
// gone from an otherwise empty limiter, which is how a and b are chosen:
// a in the first hold, b in the last.
func sweepHistory(t *testing.T, c *hotlimit.ConcurrencyLimiter, clk *hookClock) []porcupine.Operation {
	t.Helper()
	hold := func(key string) int { // the lock hold of a sweep that examines key
		p, ok := c.TryAcquireN(key, 1)
		if !ok || !p.Release() {
			t.Fatalf("%s: cannot acquire and release", key)
		}
		gone := 0
		clk.reads, clk.f = 0, func(read int) {
			if gone == 0 && c.Len() == 0 {
				gone = read
			}
		}
		if n := c.Sweep(); n != 1 {
			t.Fatalf("Sweep of one idle key removed %d", n)
		}
		if gone == 0 {
			return clk.reads // examined in the last hold
		}
		return gone - 1
	}
	a, b := "", ""
	ha, hb := 0, 0
	for i := 0; i < 64 && (a == "" || b == "" || ha == hb && clk.reads > 1); i++ {
		k := fmt.Sprint("k", i)
		switch h := hold(k); {
		case a == "" || h < ha:
			a, ha = k, h
		case b == "" || h > hb:
			b, hb = k, h
		}
	}
	if a == "" || b == "" || ha == hb && clk.reads > 1 {
		t.Fatal("found no two keys the sweep examines in different lock holds")
	}

	var (
		tick int64
		hist []porcupine.Operation
		id   int
	)
	add := func(in concIn, call int64, out concOut) {
		tick++
		hist = append(hist, porcupine.Operation{ClientId: len(hist), Input: in, Output: out, Call: call, Return: tick})
	}
	acquire := func(key string) hotlimit.Permit {
		id++
		tick++
		call := tick
		p, ok := c.TryAcquireN(key, 1)
		add(concIn{op: opTryAcquire, key: key, n: 1, id: id}, call, concOut{ok: ok})
		return p
	}
	release := func(key string, p hotlimit.Permit, permit int) {
		tick++
		call := tick
		add(concIn{op: opRelease, key: key, n: 1, permit: permit}, call, concOut{ok: p.Release()})
	}
	pa := acquire(a)
	release(b, acquire(b), 2)
	clk.reads, clk.f = 0, func(read int) {
		if read == hb {
			release(a, pa, 1)
			acquire(b)
		}
	}
	tick++
	call := tick
	n := c.Sweep()
	add(concIn{op: opConcSweep}, call, concOut{n: int64(n)})
	return hist
}

// TestConcSweepOneStep replays, deterministically, the interleaving that
// made concurrency histories fail: a Sweep that examines key a (held),
// then, between its lock holds, sees a released and b (idle) acquired, and
// examines b. On the limiter the histories use (one shard), the sweep's
// single lock hold reads the clock before it examines either key, so it
// removes a: one step of the model. With two shards it removes neither, a
// count no instant of the sweep has (a was held while b was idle, then a
// idle while b held, so any instant has an idle key to remove): Sweep is
// made shard by shard, not in one step.
func TestConcSweepOneStep(t *testing.T) {
	cfg := ConcConfig{Limit: 2}
	clk := &hookClock{}
	c, err := newConcLimiter(cfg, hotlimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if res, _ := porcupine.CheckOperationsVerbose(concModel(cfg), sweepHistory(t, c, clk), time.Minute); res != porcupine.Ok {
		t.Fatalf("a Sweep overlapping a release and an acquisition on the histories' limiter: %v, want linearizable", res)
	}

	clk2 := &hookClock{}
	c2, err := newConcLimiter(cfg, hotlimit.WithClock(clk2), hotlimit.WithShards(2))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	hist := sweepHistory(t, c2, clk2)
	if res, _ := porcupine.CheckOperationsVerbose(concModel(cfg), hist, time.Minute); res != porcupine.Illegal {
		t.Fatalf("the same with two shards: %v (sweep → %d), want not linearizable under a one-step Sweep", res, hist[len(hist)-1].Output.(concOut).n)
	}
}
