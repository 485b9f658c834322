package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestBatchMatchesOneByOne: a batch decides its calls in order, each as
// the same call alone at the same instant would be decided: every policy,
// one or two layers, the same key several times in one batch, costs
// from -1 to limit+1, with and without each layer's next unit. The
// replies are compared value for value.
func TestBatchMatchesOneByOne(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	b := routerFor(c).batch
	second := hotlimit.SlidingWindow{Limit: 7, Window: time.Second}
	for pi, policy := range policiesForDiff {
		t.Run(fmt.Sprintf("%d_%T", pi, policy), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(pi), 7))
			now := int64(baseMicros)
			mk := func(p string) (*Limiter, *Limiter) {
				a := must(New(c, "p", policy, WithPrefix(p), WithTimeout(5*time.Second)))
				s := must(New(c, "s", second, WithPrefix(p), WithTimeout(5*time.Second)))
				a.testNow = func() int64 { return now }
				s.testNow = a.testNow
				return a, s
			}
			batched, batched2 := mk(redistest.Prefix(t))
			alone, alone2 := mk(redistest.Prefix(t))
			limit, per := batched.spec.limit, period(policy)
			for round := range 30 {
				now += rng.Int64N(per + 1)
				n := 1 + rng.IntN(20)
				var calls []*batchCall
				var want [][]int64
				var callLayers [][]Layer
				for range n {
					key := []string{"a", "b"}[rng.IntN(2)]
					cost := rng.Int64N(limit+3) - 1
					next := rng.IntN(2) == 0
					ls := []Layer{{batched, key, cost}}
					la := []Layer{{alone, key, cost}}
					if rng.IntN(2) == 0 {
						ls = append(ls, Layer{batched2, key, 1})
						la = append(la, Layer{alone2, key, 1})
					}
					var akeys []string
					for i := range la {
						akeys = append(akeys, la[i].Limiter.RedisKey(key))
					}
					calls = append(calls, batchCallOf(ls, next))
					callLayers = append(callLayers, ls)
					w, err := run(ctx, time.Now().Add(5*time.Second), c, routerFor(c).addr, la, akeys, next, "", nil)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, w)
				}
				b.sendMany(calls, strconv.FormatInt(now, 10))
				for i, bc := range calls {
					if bc.err != nil {
						t.Fatalf("round %d: batch: %v", round, bc.err)
					}
					got := replyOf(bc, callLayers[i])
					if !slices.Equal(got, want[i]) {
						t.Fatalf("round %d, call %d of %d (%d layers, cost %v, next %v): batched %v, alone %v",
							round, i, n, len(bc.keys), bc.args[5], bc.next, got, want[i])
					}
				}
			}
		})
	}
}

// TestBatchExactTotals: 4 instances (clients) × 16 goroutines decide 3,200
// requests on 4 keys of a fixed window of 100 through batches (whatever
// the schedule makes of them), alone and in two layers: each key admits
// exactly its limit, never more, and no call fails.
func TestBatchExactTotals(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	var admitted [4]atomic.Int64
	var wg sync.WaitGroup
	var sent redistest.Counter
	for range 4 {
		c := redistest.Client(t, addr)
		c.AddHook(&sent)
		l := must(New(c, "x", hotlimit.FixedWindow{Limit: 100, Window: time.Hour}, WithPrefix(prefix), WithTimeout(10*time.Second)))
		g := must(New(c, "g", hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1_000_000}, WithPrefix(prefix), WithTimeout(10*time.Second)))
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 50 {
					k := (w + i) % 4
					key := strconv.Itoa(k)
					var d hotlimit.Decision
					var err error
					if i%2 == 0 {
						d, err = l.Allow(ctx, key)
					} else {
						d, err = AllowLayers(ctx, Layer{g, key, 1}, Layer{l, key, 1})
					}
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						admitted[k].Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	for k := range admitted {
		if n := admitted[k].Load(); n != 100 {
			t.Errorf("key %d: %d admitted, want exactly 100", k, n)
		}
	}
	t.Logf("3200 decisions in %d commands", sent.N())
}

// TestBatchScriptErrorIsolated: a decision that fails in the script (its
// key holds another type) fails alone; the other decisions of its batch
// are decided and replied as they would be alone, and the one after it
// sees the state the one before it left.
func TestBatchScriptErrorIsolated(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	b := routerFor(c).batch
	now := int64(baseMicros)
	l := must(New(c, "e", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 3}, WithPrefix(redistest.Prefix(t))))
	if err := c.HSet(ctx, l.RedisKey("bad"), "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	mk := func(key string) *batchCall {
		return &batchCall{keys: []string{l.RedisKey(key)}, args: []any{"", l.argv[0], l.argv[1], l.argv[2], l.argv[3], int64(2)},
			deadline: time.Now().Add(5 * time.Second)}
	}
	calls := []*batchCall{mk("good"), mk("bad"), mk("good")}
	b.sendMany(calls, strconv.FormatInt(now, 10))
	if calls[1].err == nil {
		t.Fatalf("the decision on a hash was not an error: %v", calls[1].reply)
	}
	for i, want := range []int64{1, 0} { // the first admitted, the second denied (2+2 > 3)
		bc := calls[2*i]
		if bc.err != nil || len(bc.reply) == 0 || bc.reply[0] != want {
			t.Fatalf("decision %d of the batch: %v, %v; want allowed=%d", 2*i, bc.reply, bc.err, want)
		}
	}
}

// TestBatchDeadlineIsNotShared: a call whose deadline has passed does not
// fail the other calls of its batch; alone they would have been decided.
// (Each caller waits for its own context: see batcher.do.)
func TestBatchDeadlineIsNotShared(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	b := routerFor(c).batch
	l := must(New(c, "d", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 3}, WithPrefix(redistest.Prefix(t))))
	mk := func(key string, dl time.Time) *batchCall {
		return &batchCall{keys: []string{l.RedisKey(key)}, args: []any{"", l.argv[0], l.argv[1], l.argv[2], l.argv[3], int64(1)}, deadline: dl}
	}
	calls := []*batchCall{mk("a", time.Now().Add(5*time.Second)), mk("b", time.Now().Add(-time.Millisecond)), mk("c", time.Now().Add(5*time.Second))}
	b.sendMany(calls, strconv.FormatInt(baseMicros, 10))
	for _, i := range []int{0, 2} {
		if bc := calls[i]; bc.err != nil || len(bc.reply) == 0 || bc.reply[0] != int64(1) {
			t.Fatalf("call %d, with 5 s left, in a batch with a call past its deadline: %v, %v", i, bc.reply, bc.err)
		}
	}
}

// TestBatchWaiterLeavesOnItsContext: a call whose context ends while its
// batch is in flight returns the context's error then, without waiting
// for the batch.
func TestBatchWaiterLeavesOnItsContext(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	b := &batcher{r: routerFor(c), turns: maxBatchesInFlight}
	l := must(New(c, "w", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 3}, WithPrefix(redistest.Prefix(t))))
	// Every batch slot is taken: the call queues.
	b.mu.Lock()
	b.inFlight = maxBatchesInFlight
	b.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	bc := &batchCall{keys: []string{l.RedisKey("k")}, args: []any{"", l.argv[0], l.argv[1], l.argv[2], l.argv[3], int64(1)}, deadline: time.Now().Add(5 * time.Second)}
	done := make(chan error, 1)
	go func() {
		_, _, err := b.do(ctx, bc)
		done <- err
	}()
	redistest.WaitFor(t, "the call to queue", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == 1
	})
	// Taken into a batch that is in flight (nobody sends it here).
	b.mu.Lock()
	b.takeLocked(nil)
	b.mu.Unlock()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("do: %v; want the context's error", err)
	}
}

// TestBatchDeadline: a batch's deadline is the latest of its calls'
// deadlines (a caller's short deadline fails no other call), but no later
// than the earliest end of their timeouts (until), which bounds every
// call of it.
func TestBatchDeadline(t *testing.T) {
	b := &batcher{}
	at := func(d time.Duration) time.Time { return time.Unix(1000, 0).Add(d) }
	mk := func(deadline, until time.Duration) *batchCall {
		c := &batchCall{keys: []string{"k"}, args: []any{"", 0, 0, 0, 0, int64(1)}, deadline: at(deadline)}
		if until >= 0 {
			c.until = at(until)
		}
		return c
	}
	for _, c := range []struct {
		name  string
		calls []*batchCall
		want  time.Duration
	}{
		{"one", []*batchCall{mk(5*time.Second, 5*time.Second)}, 5 * time.Second},
		{"the earliest until", []*batchCall{mk(5*time.Second, 5*time.Second), mk(7*time.Second, 7*time.Second)}, 5 * time.Second},
		{"a caller's short deadline", []*batchCall{mk(time.Second, 5*time.Second), mk(4*time.Second, 4*time.Second)}, 4 * time.Second},
		{"callers' deadlines only", []*batchCall{mk(time.Second, 5*time.Second), mk(2*time.Second, 6*time.Second)}, 2 * time.Second},
		{"no until", []*batchCall{mk(5*time.Second, -1), mk(7*time.Second, -1)}, 7 * time.Second},
	} {
		if _, _, dl := b.batchArgs(c.calls, ""); !dl.Equal(at(c.want)) {
			t.Errorf("%s: deadline %v, want %v", c.name, dl.Sub(at(0)), c.want)
		}
	}
}

// TestBatchLateCallUnsent: a call of a batch whose timeout passed while
// it was queued is not sent: it fails unsent (errNotSent, a timeout), and
// the others are decided.
func TestBatchLateCallUnsent(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	b := routerFor(c).batch
	l := must(New(c, "late", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 3}, WithPrefix(redistest.Prefix(t))))
	mk := func(key string, until time.Time) *batchCall {
		return &batchCall{keys: []string{l.RedisKey(key)}, args: []any{"", l.argv[0], l.argv[1], l.argv[2], l.argv[3], int64(1)},
			deadline: until, until: until}
	}
	later := time.Now().Add(time.Minute)
	calls := []*batchCall{mk("a", later), mk("b", time.Now().Add(-time.Millisecond)), mk("c", later)}
	b.sendMany(calls, strconv.FormatInt(baseMicros, 10))
	for _, i := range []int{0, 2} {
		if bc := calls[i]; bc.err != nil || len(bc.reply) == 0 || bc.reply[0] != int64(1) {
			t.Fatalf("call %d, in time: %v, %v", i, bc.reply, bc.err)
		}
	}
	if err := calls[1].err; !errors.Is(err, errNotSent) || !errors.Is(err, context.DeadlineExceeded) || calls[1].calls != nil {
		t.Fatalf("the late call: %v, calls %v; want errNotSent, DeadlineExceeded, no call", err, calls[1].calls)
	}
	if d := must(l.AllowN(ctx, "b", 0)); d.Remaining != 3 {
		t.Fatalf("the late call's key: %d left, want 3 (nothing sent)", d.Remaining)
	}
}

// TestBatchShortReply: an admission of fixed windows in a batch comes
// back as windows.lua's short reply (the batch's instant and each layer's
// Remaining), which run expands to the reply of the same call alone; a
// denial, or a layer read stale (the server's clock behind the state's
// window), comes back in full. Without the short reply Redis spends a
// table and 2n more integers per decision on every common call.
func TestBatchShortReply(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	b := routerFor(c).batch
	now := int64(baseMicros)
	mk := func(p string) (*Limiter, *Limiter) {
		a := must(New(c, "a", hotlimit.FixedWindow{Limit: 3, Window: time.Second}, WithPrefix(p)))
		s := must(New(c, "s", hotlimit.FixedWindow{Limit: 5, Window: time.Minute}, WithPrefix(p)))
		a.testNow = func() int64 { return now }
		s.testNow = a.testNow
		return a, s
	}
	batched, batched2 := mk(redistest.Prefix(t))
	alone, alone2 := mk(redistest.Prefix(t))
	call := func(key string, cost, cost2 int64, next bool) (*batchCall, []Layer, []int64) {
		ls := []Layer{{batched, key, cost}, {batched2, key, cost2}}
		la := []Layer{{alone, key, cost}, {alone2, key, cost2}}
		akeys := []string{alone.RedisKey(key), alone2.RedisKey(key)}
		want, err := run(ctx, time.Now().Add(5*time.Second), c, routerFor(c).addr, la, akeys, next, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return batchCallOf(ls, next), ls, want
	}
	for _, step := range []struct {
		name        string
		at          int64 // µs after baseMicros
		key         string
		cost, cost2 int64 // the layers' (a Window of a second, of a minute)
		short       bool
	}{
		{"first admission", 0, "a", 1, 1, true},
		{"admission", 1000, "a", 2, 1, true},
		{"check, cost 0", 2000, "a", 0, 0, true},
		{"denial", 3000, "a", 1, 1, false},
		{"new key", 4000, "b", 3, 1, true},
		{"one layer counted", 5000, "c", 1, 0, true},
		// The clock set back a second, into the windows before: stale
		// readings of the states, read (cost 0) and counted (cost 1).
		{"stale, read", -1_000_000 + 6000, "a", 0, 0, false},
		{"stale, counted", -1_000_000 + 7000, "c", 1, 0, false},
	} {
		now = baseMicros + step.at
		for _, next := range []bool{false, true} {
			bc, ls, want := call(fmt.Sprintf("%s-%v", step.key, next), step.cost, step.cost2, next)
			b.sendMany([]*batchCall{bc}, strconv.FormatInt(now, 10))
			if bc.err != nil {
				t.Fatalf("%s: %v", step.name, bc.err)
			}
			if got := bc.short; got != step.short {
				t.Fatalf("%s (next %v): short reply %v (%v); want %v", step.name, next, got, bc.reply, step.short)
			}
			if got := replyOf(bc, ls); !slices.Equal(got, want) {
				t.Fatalf("%s (next %v): batched %v, alone %v", step.name, next, got, want)
			}
		}
	}
}

// TestBatchReplyFits: settleBatch takes batch.lua's reply only in its
// form, each short reply of the length of its call's layers, and fails
// every call of the batch on any other.
func TestBatchReplyFits(t *testing.T) {
	two, one := &batchCall{keys: []string{"k1", "k2"}}, &batchCall{keys: []string{"k"}}
	bad := errors.New("ERR a decision's own error")
	for _, tc := range []struct {
		vals []any
		fits bool
	}{
		{[]any{int64(7), int64(2), int64(4), int64(1), []any{int64(0)}}, true},
		{[]any{int64(7), []any{int64(1)}, int64(2), int64(3)}, true},
		{[]any{int64(7), bad, bad}, true},
		{[]any{}, false},                                                         // no instant
		{[]any{"7", int64(2), int64(4), int64(1), bad}, false},                   // the instant not an integer
		{[]any{int64(-1), int64(2), int64(4), int64(1), bad}, false},             // nor negative
		{[]any{int64(7), int64(2), int64(4), []any{int64(0)}}, false},            // a short reply cut short
		{[]any{int64(7), int64(2), int64(4), int64(1)}, false},                   // a call without a reply
		{[]any{int64(7), int64(3), int64(4), int64(1), bad}, false},              // not the short reply's 2
		{[]any{int64(7), int64(2), int64(4), "1", bad}, false},                   // a Remaining not an integer
		{[]any{int64(7), int64(2), int64(4), int64(1), bad, int64(0)}, false},    // more after the last call
		{[]any{int64(7), int64(2), int64(4), int64(1), "a string reply"}, false}, // neither
	} {
		if got := batchReplyFits([]*batchCall{two, one}, tc.vals); got != tc.fits {
			t.Errorf("batchReplyFits(%v) = %v; want %v", tc.vals, got, tc.fits)
		}
	}
	// settleBatch fails every call on a reply that does not fit.
	calls := []*batchCall{{keys: []string{"k1", "k2"}}, {keys: []string{"k"}}}
	(&batcher{}).settleBatch(calls, []any{int64(7), int64(2), int64(4)}, nil, nil)
	for i, c := range calls {
		if c.err == nil || c.reply != nil {
			t.Fatalf("call %d of a batch whose reply does not fit: %v, %v", i, c.reply, c.err)
		}
	}
}
