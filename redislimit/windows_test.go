package redislimit

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// packedState is windows.lua's packed state of count q in window k.
func packedState(k, q int64) string { return strconv.FormatInt(-((k+1)<<21 + q), 10) }

// decideBatched decides layers as one decision of a batch (batch.lua) at
// the instant now, and decodes the reply as the call alone would be.
func decideBatched(t *testing.T, c *redis.Client, now int64, layers ...Layer) (hotlimit.Decision, error) {
	t.Helper()
	bc := batchCallOf(layers, false)
	routerFor(c).batch.sendMany([]*batchCall{bc}, strconv.FormatInt(now, 10))
	if bc.err != nil {
		return hotlimit.Decision{}, bc.err
	}
	d, _, _, err := decode(replyOf(bc, layers), layers, nil)
	return d, err
}

// TestWindowsClockSetBack: the server's clock set back into an earlier
// window (a failover to a replica whose clock is behind) is a stale
// reading, decided at the start of the window the key's state is in, as
// hotlimit decides a reading older than a window word (docs/semantics.md,
// Stale readings): ResetAfter and RetryAfter are the whole window, not
// the rest of the earlier one, and the state's counts still count. Both
// layouts of the state (packed: a Limit under 2^20; the string: 2^20),
// alone (script.lua) and in a batch (batch.lua), against hotlimit on a
// ManualClock set back the same way, and with the values written out.
func TestWindowsClockSetBack(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	const w = 2 * time.Second
	for _, limit := range []int64{5, 1 << 20} {
		for _, batched := range []bool{false, true} {
			t.Run(fmt.Sprintf("limit=%d/batched=%v", limit, batched), func(t *testing.T) {
				clock := hotlimit.NewManualClock()
				k := int64(baseMicros) / int64(w/time.Microsecond)
				t1 := k*int64(w/time.Microsecond) + 1_481_000 // 519 ms before window k ends
				clock.Set(time.Duration(t1) * time.Microsecond)
				p := newPair(t, c, clock, "sb", redistest.Prefix(t), hotlimit.FixedWindow{Limit: limit, Window: w})
				decide := func(cost int64) hotlimit.Decision {
					t.Helper()
					want := p.local.AllowN("k", cost)
					var got hotlimit.Decision
					var err error
					if batched {
						got, err = decideBatched(t, c, int64(clock.Now()/time.Microsecond), Layer{p.remote, "k", cost})
					} else {
						got, err = p.remote.AllowN(ctx, "k", cost)
					}
					if err != nil {
						t.Fatal(err)
					}
					if !sameDecision(want, got) {
						t.Fatalf("cost %d at %dµs:\n local %+v\n redis %+v", cost, clock.Now()/time.Microsecond, want, got)
					}
					return got
				}
				if d := decide(1); d.Remaining != limit-1 || d.ResetAfter != 519*time.Millisecond {
					t.Fatalf("in window k: %+v", d)
				}
				clock.Advance(-1600 * time.Millisecond) // into window k−1, 119 ms before its end
				if d := decide(1); !d.Allowed || d.Remaining != limit-2 || d.ResetAfter != w {
					t.Fatalf("set back, admitted: %+v, want Remaining %d and ResetAfter %v (window k from its start)", d, limit-2, w)
				}
				if d := decide(limit); d.Allowed || d.RetryAfter != w || d.ResetAfter != w || d.Remaining != limit-2 {
					t.Fatalf("set back, denied: %+v, want RetryAfter = ResetAfter = %v", d, w)
				}
				if d := decide(0); d.Remaining != limit-2 || d.ResetAfter != w {
					t.Fatalf("set back, cost 0: %+v", d)
				}
				clock.Advance(2 * time.Second) // window k again, 1,881 ms in
				if d := decide(1); d.Remaining != limit-3 || d.ResetAfter != 119*time.Millisecond {
					t.Fatalf("back in window k: %+v", d)
				}
			})
		}
	}
}

// TestWindowsZeroCountSetBack: a state whose count is 0 (a lease's
// give-back can leave one) still records its window, as hotlimit's word
// does: a reading from an earlier window is decided at its start. Every
// path: windows.lua alone and batched, and script.lua's general path (an
// AdmitN).
func TestWindowsZeroCountSetBack(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	const w = int64(2_000_000)
	k := int64(baseMicros) / w
	now := (k-1)*w + 500_000 // window k−1
	for _, path := range []string{"alone", "batched", "admit"} {
		t.Run(path, func(t *testing.T) {
			l := must(New(c, "z", hotlimit.FixedWindow{Limit: 5, Window: 2 * time.Second}, WithPrefix(redistest.Prefix(t))))
			l.testNow = func() int64 { return now }
			if err := c.Set(ctx, l.RedisKey("k"), packedState(k, 0), time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			var d hotlimit.Decision
			var err error
			switch path {
			case "alone":
				d, err = l.Allow(ctx, "k")
			case "batched":
				d, err = decideBatched(t, c, now, Layer{l, "k", 1})
			default:
				var a Admission
				d, err = l.AdmitN(ctx, &a, "k", 1)
				if err == nil && a.mark != k {
					t.Errorf("admission recorded in window %d, want %d", a.mark, k)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed || d.Remaining != 4 || d.ResetAfter != 2*time.Second {
				t.Fatalf("%+v, want Remaining 4 and ResetAfter 2s (window k from its start)", d)
			}
			if got := c.Get(ctx, l.RedisKey("k")).Val(); got != packedState(k, 1) {
				t.Fatalf("state %q, want %q (window k, count 1)", got, packedState(k, 1))
			}
		})
	}
}

// TestWindowsLayouts: a fixed window of a Limit under 2^20 stores the
// packed state -((k+1)·2^21 + q); a Limit of 2^20 or more, or a window
// whose index passes 2^32 (250 ms windows today), the string "k 0 q", as
// every fixed window did before. A key holding the string layout in the
// packed range (written by an earlier version) is read as it says, and
// its next admission packs it.
func TestWindowsLayouts(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	now := int64(baseMicros)
	p := redistest.Prefix(t)
	mk := func(name string, policy hotlimit.FixedWindow) *Limiter {
		l := must(New(c, name, policy, WithPrefix(p)))
		l.testNow = func() int64 { return now }
		return l
	}
	state := func(l *Limiter) string { return c.Get(ctx, l.RedisKey("k")).Val() }
	for _, tc := range []struct {
		name   string
		policy hotlimit.FixedWindow
		want   func(k int64) string
	}{
		{"packed", hotlimit.FixedWindow{Limit: 1<<20 - 1, Window: time.Second}, func(k int64) string { return packedState(k, 3) }},
		{"bigLimit", hotlimit.FixedWindow{Limit: 1 << 20, Window: time.Second}, func(k int64) string { return fmt.Sprintf("%d 0 3", k) }},
		{"shortWindow", hotlimit.FixedWindow{Limit: 10, Window: 250 * time.Millisecond}, func(k int64) string { return fmt.Sprintf("%d 0 3", k) }},
	} {
		l := mk(tc.name, tc.policy)
		d, err := l.AllowN(ctx, "k", 3)
		if err != nil || !d.Allowed {
			t.Fatalf("%s: %+v %v", tc.name, d, err)
		}
		if got, want := state(l), tc.want(now/l.spec.a); got != want {
			t.Errorf("%s: state %q, want %q", tc.name, got, want)
		}
	}
	// An earlier version's string layout, in the packed range: read, then
	// packed by the next admission; a later layer's key of that layout
	// leaves the call to the general path, which undoes nothing it did not
	// do (the first layer's state is as it would be alone).
	a, b := mk("olda", hotlimit.FixedWindow{Limit: 10, Window: time.Second}), mk("oldb", hotlimit.FixedWindow{Limit: 10, Window: time.Second})
	k := now / 1_000_000
	for _, l := range []*Limiter{a, b} {
		if err := c.Set(ctx, l.RedisKey("k"), fmt.Sprintf("%d 0 4", k), time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Set(ctx, a.RedisKey("k"), packedState(k, 4), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	d, err := AllowLayers(ctx, Layer{a, "k", 2}, Layer{b, "k", 1})
	if err != nil || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("%+v %v, want admitted with 4 left (a: 10−4−2)", d, err)
	}
	if got := state(a); got != packedState(k, 6) {
		t.Errorf("a: %q, want %q", got, packedState(k, 6))
	}
	if got := state(b); got != packedState(k, 5) {
		t.Errorf("b: %q, want %q (read as 4, packed)", got, packedState(k, 5))
	}
}

// TestWindowsDenialUndone: a decision that windows.lua denies, or that
// fails on a key of another type, leaves every key as it was: a key that
// was absent is absent again, a state of this window or an earlier one is
// the same value with its TTL, and a bucket's TAT under the same key (a
// policy changed from a bucket) is the same TAT, not deleted.
func TestWindowsDenialUndone(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	now := int64(baseMicros)
	k := now / 1_000_000
	p := redistest.Prefix(t)
	var ls []*Limiter
	for i := range 5 {
		l := must(New(c, "u"+strconv.Itoa(i), hotlimit.FixedWindow{Limit: 10, Window: time.Second}, WithPrefix(p)))
		l.testNow = func() int64 { return now }
		ls = append(ls, l)
	}
	set := func(l *Limiter, v string) {
		if err := c.Set(ctx, l.RedisKey("k"), v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// ls[0] absent; ls[1] this window, 3; ls[2] an earlier window, 9;
	// ls[3] a TAT; ls[4] full, or a hash.
	set(ls[1], packedState(k, 3))
	set(ls[2], packedState(k-1, 9))
	set(ls[3], "1764000000999999")
	snapshot := func() []string {
		var out []string
		for _, l := range ls {
			v := c.Get(ctx, l.RedisKey("k")).Val()
			ttl := c.PTTL(ctx, l.RedisKey("k")).Val()
			out = append(out, fmt.Sprintf("%s ttl>%v", v, ttl > 59*time.Minute))
		}
		return out
	}
	layers := func(last int64) []Layer {
		var out []Layer
		for i, l := range ls {
			cost := int64(2)
			if i == len(ls)-1 {
				cost = last
			}
			out = append(out, Layer{l, "k", cost})
		}
		return out
	}
	set(ls[4], packedState(k, 10))
	before := snapshot()
	d, err := AllowLayers(ctx, layers(1)...)
	if err != nil || d.Allowed || d.RetryAfter != time.Duration(1_000_000-now%1_000_000)*time.Microsecond {
		t.Fatalf("%+v %v, want denied by the full layer until the window's end", d, err)
	}
	if after := snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("denied, the keys changed:\n before %q\n after  %q", before, after)
	}
	if n := c.Exists(ctx, ls[0].RedisKey("k")).Val(); n != 0 {
		t.Fatal("the absent key exists after the denial")
	}
	c.Del(ctx, ls[4].RedisKey("k"))
	if err := c.HSet(ctx, ls[4].RedisKey("k"), "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	before = snapshot()
	if _, err := AllowLayers(ctx, layers(1)...); err == nil {
		t.Fatal("no error for a key holding a hash")
	}
	if after := snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("failed on a hash, the keys changed:\n before %q\n after  %q", before, after)
	}
	// Admitted, for contrast: every layer counts in this window.
	c.Del(ctx, ls[4].RedisKey("k"))
	d, err = AllowLayers(ctx, layers(1)...)
	if err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	for i, want := range []int64{2, 5, 2, 2, 1} {
		if got := c.Get(ctx, ls[i].RedisKey("k")).Val(); got != packedState(k, want) {
			t.Errorf("layer %d: %q, want %q", i, got, packedState(k, want))
		}
	}
}
