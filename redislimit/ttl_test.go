package redislimit

import (
	"context"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// testTTLExtra is the hour that a test instant adds to every TTL
// (internal/luasrc/start.lua's ttlExtra), in ms.
const testTTLExtra = 3_600_000

// serverMs returns the server's clock in ms, rounded down, or up when up.
func serverMs(t *testing.T, c *redis.Client, up bool) int64 {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	us := tm.UnixMicro()
	if up {
		return (us + 999) / 1000
	}
	return us / 1000
}

// written is the TTL of a write that a script made between two readings
// of the server's clock, before and after (ms, serverMs): key's expiry
// (PEXPIRETIME, an instant in ms on that clock) minus the instant of the
// write, which lies between them, so the TTL lies in [lo, hi] whatever the
// machine's load. A key without a TTL fails the test.
func written(t *testing.T, c *redis.Client, key string, before, after int64) (lo, hi int64) {
	t.Helper()
	at, err := c.Do(context.Background(), "PEXPIRETIME", key).Int64()
	if err != nil || at < 0 {
		t.Fatalf("PEXPIRETIME %s: %d %v (no TTL)", key, at, err)
	}
	return at - after, at - before
}

// wantTTL checks that the TTL of a write between before and after is
// ms, the state's own time still to matter, rounded up to a millisecond,
// plus the test instant's hour.
func wantTTL(t *testing.T, c *redis.Client, key string, before, after, us int64) {
	t.Helper()
	want := (us+999)/1000 + testTTLExtra
	if lo, hi := written(t, c, key, before, after); want < lo || want > hi {
		t.Fatalf("%s: TTL written in [%d, %d] ms, want %d ms (%d µs of state, plus the test's hour)", key, lo, hi, want, us)
	}
}

// TestLeaseTTLSetBack: a take after the server's clock was set back by
// less than a window (a stale reading: the state is from a later instant)
// keeps the key until the state stops mattering, measured from the
// reading: a fixed window's state until the end of its own (later)
// window, not a whole window from the reading, which would expire it
// before that window ends and hand the next take a fresh window's budget
// in it; a token bucket's until its TAT. The TTL is checked exactly
// against the key's expiry (PEXPIRETIME), and then the state's expiry is
// applied on the test's clock: the key is deleted at the instant its TTL
// ends, and the next take, still in the state's window, is denied.
func TestLeaseTTLSetBack(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	const w = 10 * time.Minute
	W := int64(w / time.Microsecond)
	start := (epoch/W + 1) * W // the start of window k
	for _, tc := range []struct {
		name   string
		policy hotlimit.Policy
	}{
		{"fixed", hotlimit.FixedWindow{Limit: 5, Window: w}},
		{"bucket", hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: w / 5}, Burst: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := hotlimit.NewManualClock()
			at := func(us int64) { clk.Set(time.Duration(us-epoch) * time.Microsecond) }
			l := leased(t, c, redistest.Prefix(t), tc.policy, clk)
			key := l.RedisKey("k")
			take := func(lo, want int64) (takeReply, int64, int64) {
				t.Helper()
				before := serverMs(t, c, false)
				r, err := l.leases.take(ctx, "k", lo, want)
				if err != nil {
					t.Fatal(err)
				}
				return r, before, serverMs(t, c, true)
			}
			if tc.name == "bucket" {
				// Its TAT is the state's own time: after a take of 1 a
				// minute into window k (TAT k+3min), a set-back of 3
				// minutes leaves a debt of 5 of the bucket's 10 minutes.
				at(start + 60_000_000)
				if r, _, _ := take(1, 1); r.granted != 1 {
					t.Fatalf("first take: %+v", r)
				}
				set := start - 120_000_000
				at(set)
				r, before, after := take(1, 1)
				if r.granted != 1 || r.stamp != start+300_000_000 {
					t.Fatalf("take after the set-back: %+v, want the TAT moved from %d", r, start+180_000_000)
				}
				wantTTL(t, c, key, before, after, r.stamp-set)
				return
			}
			at(start + 60_000_000) // a minute into window k
			if r, _, _ := take(3, 3); r.granted != 3 {
				t.Fatalf("first take: %+v", r)
			}
			set := start - 540_000_000 // set back into window k−1, 9 minutes before k
			at(set)
			r, before, after := take(1, 1)
			if r.granted != 1 || r.stamp != start/W {
				t.Fatalf("take after the set-back: %+v, want 1 unit in the state's own window %d", r, start/W)
			}
			until := start + W // the state's window's end
			wantTTL(t, c, key, before, after, until-set)
			// The key's expiry on the test's clock: its TTL at the most,
			// less the hour, from the set-back instant.
			_, hi := written(t, c, key, before, after)
			expires := set + (hi-testTTLExtra)*1000
			probe := set + W + 60_000_000 // a window and a minute after the set-back, before until
			at(probe)
			if probe >= expires {
				c.Del(ctx, key)
			}
			if r, _, _ := take(2, 2); r.granted != 0 {
				t.Fatalf("%d µs after the set-back (the state's window ends at %d): granted %+v; want denied (4 of 5 units taken)", probe-set, until-set, r)
			}
		})
	}
}

// TestWindowChangeTTL: a window policy whose Window changes under the
// same name (a policy changed under traffic, two versions of a
// deployment) finds a state whose window index was counted in the old
// Window. Lengthened (1s to 1h), that index read with the new Window is a
// window decades ahead, which a stale reading must not take for the
// state's own: its counts carry over into the window holding the instant
// of the change, as hotlimit's SetPolicy carries them (the oracle, on a
// ManualClock at the same instants), and the TTL written is the new
// window's: no key kept for decades, no key denied until then. Shortened
// (1h to 1s), the old index reads as a window long past: the state is
// fresh, with a TTL of the new window. Every path that decides a window:
// windows.lua (a Limit under 2^20, alone and batched), script.lua's
// layered fixed windows (the string layout, a Limit of 2^20), its general
// path (AdmitN; the sliding window) and lease.lua.
func TestWindowChangeTTL(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	type window = func(limit int64, w time.Duration) hotlimit.Policy
	fixed := func(limit int64, w time.Duration) hotlimit.Policy {
		return hotlimit.FixedWindow{Limit: limit, Window: w}
	}
	sliding := func(limit int64, w time.Duration) hotlimit.Policy {
		return hotlimit.SlidingWindow{Limit: limit, Window: w}
	}
	for _, tc := range []struct {
		name   string
		policy window
		limit  int64
		via    string // allow, batch, admit, lease
	}{
		{"fixed/packed", fixed, 5, "allow"},
		{"fixed/batched", fixed, 5, "batch"},
		{"fixed/string", fixed, 1 << 20, "allow"},
		{"fixed/admit", fixed, 5, "admit"},
		{"fixed/lease", fixed, 5, "lease"},
		{"sliding", sliding, 5, "allow"},
		{"sliding/admit", sliding, 5, "admit"},
	} {
		for _, change := range []struct {
			name     string
			from, to time.Duration
		}{{"lengthen", time.Second, time.Hour}, {"shorten", time.Hour, time.Second}} {
			t.Run(tc.name+"/"+change.name, func(t *testing.T) {
				clock := hotlimit.NewManualClock()
				clock.Set(baseMicros * time.Microsecond)
				now := func() int64 { return int64(clock.Now() / time.Microsecond) }
				name, prefix := "wc", redistest.Prefix(t)
				old := tc.policy(tc.limit, change.from)
				p := newPair(t, c, clock, name, prefix, old)
				if d := must(p.remote.AllowN(ctx, "k", 2)); !d.Allowed {
					t.Fatalf("old policy: %+v", d)
				}
				must(p.local.AllowN("k", 2), nil)
				nw := tc.policy(tc.limit, change.to)
				if err := p.local.SetPolicy(nw); err != nil {
					t.Fatal(err)
				}
				remote := must(New(c, name, nw, WithPrefix(prefix), WithTimeout(5*time.Second)))
				remote.testNow = now
				key := remote.RedisKey("k")
				W := int64(change.to / time.Microsecond)
				// The state's own time to matter after an admission at
				// now: the new window's end (the next one's, for a
				// sliding window's current count).
				matters := func() int64 {
					end := (now()/W + 1) * W
					if _, ok := nw.(hotlimit.SlidingWindow); ok {
						end += W
					}
					return end - now()
				}
				decide := func() (hotlimit.Decision, int64, int64) {
					t.Helper()
					before := serverMs(t, c, false)
					var d hotlimit.Decision
					var err error
					switch tc.via {
					case "batch":
						d, err = decideBatched(t, c, now(), Layer{remote, "k", 1})
					case "admit":
						var a Admission
						d, err = remote.AdmitN(ctx, &a, "k", 1)
					default:
						d, err = remote.AllowN(ctx, "k", 1)
					}
					if err != nil {
						t.Fatal(err)
					}
					return d, before, serverMs(t, c, true)
				}
				if tc.via == "lease" {
					clk := hotlimit.NewManualClock()
					clk.Set(time.Duration(now()-epoch) * time.Microsecond)
					l := leased(t, c, name, nw, clk, WithPrefix(prefix))
					before := serverMs(t, c, false)
					r, err := l.leases.take(ctx, "k", 1, 1)
					after := serverMs(t, c, true)
					if err != nil {
						t.Fatal(err)
					}
					if r.granted != 1 || r.stamp != now()/W || r.left != W-now()%W {
						t.Fatalf("take: %+v, want 1 unit in window %d, %d µs left", r, now()/W, W-now()%W)
					}
					wantTTL(t, c, key, before, after, matters())
					return
				}
				// Shortened, hotlimit carries the counts into the new
				// window too; Redis cannot tell an index of a longer
				// Window from an old state's, and starts afresh (the
				// package doc, State in Redis): only the TTLs are compared.
				lengthen := change.name == "lengthen"
				want := p.local.AllowN("k", 1)
				got, before, after := decide()
				wantTTL(t, c, key, before, after, matters())
				if lengthen && !sameDecision(want, got) {
					t.Fatalf("after the change:\n local %+v\n redis %+v", want, got)
				}
				// Again at the same instant: the carried counts were written.
				want = p.local.AllowN("k", 1)
				got, _, _ = decide()
				if lengthen && !sameDecision(want, got) {
					t.Fatalf("again:\n local %+v\n redis %+v", want, got)
				}
				// The new policy's next window.
				clock.Advance(change.to)
				want = p.local.AllowN("k", 1)
				got, before, after = decide()
				wantTTL(t, c, key, before, after, matters())
				if lengthen && !sameDecision(want, got) {
					t.Fatalf("a window later:\n local %+v\n redis %+v", want, got)
				}
			})
		}
	}
}

// TestWindowLengthenedServerClock is TestWindowChangeTTL's lengthened
// Window at the server's clock (TIME), where Redis expires keys by the
// clock the scripts read, as in production: the state of the 1s Window
// starts, read in windows of an hour, long after its key expires, so its
// counts carry over into the hour holding now and the key is kept until
// that hour's end (the decision's ResetAfter), not for millennia.
func TestWindowLengthenedServerClock(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		old   hotlimit.Policy
		nw    hotlimit.Policy
		reset time.Duration // the longest ResetAfter: to the end of the hour, or the next
	}{
		{"fixed/packed", hotlimit.FixedWindow{Limit: 5, Window: time.Second}, hotlimit.FixedWindow{Limit: 5, Window: time.Hour}, time.Hour},
		{"fixed/string", hotlimit.FixedWindow{Limit: 1 << 20, Window: time.Second}, hotlimit.FixedWindow{Limit: 1 << 20, Window: time.Hour}, time.Hour},
		{"sliding", hotlimit.SlidingWindow{Limit: 5, Window: time.Second}, hotlimit.SlidingWindow{Limit: 5, Window: time.Hour}, 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := redistest.Prefix(t)
			old := must(New(c, "wl", tc.old, WithPrefix(prefix)))
			nw := must(New(c, "wl", tc.nw, WithPrefix(prefix)))
			if d := must(old.AllowN(ctx, "k", 2)); !d.Allowed {
				t.Fatalf("old policy: %+v", d)
			}
			before := serverMs(t, c, false)
			d := must(nw.AllowN(ctx, "k", 1))
			after := serverMs(t, c, true)
			limit := d.Limit
			if !d.Allowed || d.Remaining != limit-3 || d.ResetAfter > tc.reset {
				t.Fatalf("new policy: %+v, want the 2 units carried over (Remaining %d) in the hour holding now", d, limit-3)
			}
			want := int64((d.ResetAfter + time.Millisecond - 1) / time.Millisecond)
			if lo, hi := written(t, c, nw.RedisKey("k"), before, after); want < lo || want > hi {
				t.Fatalf("TTL written in [%d, %d] ms, want %d ms (the decision's ResetAfter %v)", lo, hi, want, d.ResetAfter)
			}
		})
	}
}
