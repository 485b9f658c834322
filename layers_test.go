package hotlimit_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// layered is the usual layering: a token bucket per API token, a fixed
// window per client IP, and a global sliding window.
type layered struct {
	token, ip, global *hotlimit.Limiter
	clock             *hotlimit.ManualClock
}

func newLayered(t testing.TB, tokenBurst, ipLimit, globalLimit int64) layered {
	c := hotlimit.NewManualClock()
	c.Set(time.Hour)
	mk := limiterMaker(t, c, hotlimit.WithShards(2))
	return layered{
		token:  mk(hotlimit.TokenBucket{Rate: hotlimit.PerMinute(1), Burst: tokenBurst}),
		ip:     mk(hotlimit.FixedWindow{Limit: ipLimit, Window: time.Minute}),
		global: mk(hotlimit.SlidingWindow{Limit: globalLimit, Window: time.Minute}),
		clock:  c,
	}
}

func (x layered) allow(token, ip string, cost int64) hotlimit.Decision {
	return hotlimit.AllowLayers(
		hotlimit.Layer{Limiter: x.token, Key: token, Cost: cost},
		hotlimit.Layer{Limiter: x.ip, Key: ip, Cost: cost},
		hotlimit.Layer{Limiter: x.global, Key: "global", Cost: cost},
	)
}

func TestAllowLayersGivesBack(t *testing.T) {
	x := newLayered(t, 5, 3, 4)
	if d := x.allow("tok-a", "ip-1", 2); !d.Allowed || d.Remaining != 1 || d.Limit != 3 {
		t.Fatalf("first: %+v, want allowed, binding ip layer with 1 left", d)
	}
	// ip-1 has 1 left: denied by the second layer; the token gets its 2 back.
	d := x.allow("tok-a", "ip-1", 2)
	if d.Allowed || d.Limit != 3 || d.RetryAfter != 60*time.Second {
		t.Fatalf("second: %+v, want denied by the ip window, retry in 60s", d)
	}
	if r := x.token.AllowN("tok-a", 0).Remaining; r != 3 {
		t.Fatalf("token remaining %d after a refused layered request, want 3", r)
	}
	// Global has 2 left: tok-b via ip-2 takes 2, then tok-c is refused by
	// the global layer only, and neither tok-c nor ip-2 is charged.
	if d := x.allow("tok-b", "ip-2", 2); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("third: %+v", d)
	}
	d = x.allow("tok-c", "ip-2", 1)
	if d.Allowed || d.Remaining != 0 {
		t.Fatalf("fourth: %+v, want denied by global", d)
	}
	if r := x.token.AllowN("tok-c", 0).Remaining; r != 5 {
		t.Fatalf("tok-c charged: remaining %d, want 5", r)
	}
	if r := x.ip.AllowN("ip-2", 0).Remaining; r != 1 {
		t.Fatalf("ip-2 charged: remaining %d, want 1", r)
	}
	if x.token.Len() != 2 {
		t.Fatalf("token limiter holds %d keys; a refused request for tok-c must not leave state", x.token.Len())
	}
	if st := x.token.Stats(); st.Allowed != 2+2+2 || st.Denied != 0 || st.Refunded != 2 || st.Swept != 1 {
		// 4 admissions (tok-a twice, tok-b, tok-c) and 2 peeks; 2 of them
		// given back (the token layer never denied), and tok-c's entry,
		// fresh again, is removed as swept.
		t.Fatalf("token Stats = %+v", st)
	}
}

func TestAllowLayersRetryAfterIsTheLongest(t *testing.T) {
	x := newLayered(t, 1, 10, 10)
	x.allow("tok", "ip", 1)
	x.clock.Advance(30 * time.Second)
	// The token bucket needs 30 s more; ip and global admit: RetryAfter 30 s.
	if d := x.allow("tok", "ip", 1); d.Allowed || d.RetryAfter != 30*time.Second || d.Limit != 1 {
		t.Fatalf("%+v", d)
	}
	// A nil limiter denies, forever.
	if d := hotlimit.AllowLayers(hotlimit.Layer{Limiter: x.ip, Key: "ip", Cost: 1}, hotlimit.Layer{}); d.Allowed || d.RetryAfter != hotlimit.Never {
		t.Fatalf("nil layer: %+v", d)
	}
	if r := x.ip.AllowN("ip", 0).Remaining; r != 9 {
		t.Fatalf("ip charged by a request refused by a nil layer: remaining %d", r)
	}
}

// TestAllowLayersStress: many goroutines push through 3 layers with the
// clock frozen; every layer ends holding exactly what was admitted, and no
// layer admits beyond its policy.
func TestAllowLayersStress(t *testing.T) {
	const tokens, ips = 8, 3
	const tokenBurst, ipLimit, globalLimit = 7, 15, 40
	x := newLayered(t, tokenBurst, ipLimit, globalLimit)
	var perToken [tokens]atomic.Int64
	var perIP [ips]atomic.Int64
	inParallel(16, func(g int) {
		for i := range 400 {
			tk, ip := (g+i)%tokens, (g*7+i)%ips
			cost := int64(1 + (g+i)%2)
			if x.allow(fmt.Sprint("tok", tk), fmt.Sprint("ip", ip), cost).Allowed {
				perToken[tk].Add(cost)
				perIP[ip].Add(cost)
			}
		}
	})
	var total int64
	for i := range perToken {
		got := perToken[i].Load()
		total += got
		if used := tokenBurst - x.token.AllowN(fmt.Sprint("tok", i), 0).Remaining; got > tokenBurst || used != got {
			t.Errorf("token %d: admitted %d, limiter holds %d (burst %d)", i, got, used, tokenBurst)
		}
	}
	for i := range perIP {
		got := perIP[i].Load()
		if used := ipLimit - x.ip.AllowN(fmt.Sprint("ip", i), 0).Remaining; got > ipLimit || used != got {
			t.Errorf("ip %d: admitted %d, limiter holds %d (limit %d)", i, got, used, ipLimit)
		}
	}
	if used := globalLimit - x.global.AllowN("global", 0).Remaining; total > globalLimit || used != total {
		t.Errorf("global: admitted %d, limiter holds %d (limit %d)", total, used, globalLimit)
	}
	if total < globalLimit-1 {
		t.Errorf("admitted only %d of %d: refunds lost capacity", total, globalLimit)
	}
}

func TestAllowLayersAllocatesNothing(t *testing.T) {
	c := hotlimit.NewManualClock()
	mk := limiterMaker(t, c)
	x := layered{
		token:  mk(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1_000_000_000), Burst: 1 << 40}),
		ip:     mk(hotlimit.FixedWindow{Limit: 1 << 40, Window: time.Hour}),
		global: mk(hotlimit.SlidingWindow{Limit: 1 << 20, Window: time.Hour}),
		clock:  c,
	}
	// Each key holds an admission before the measured runs, so the refused
	// request's give-backs leave it live. Without them the give-backs leave
	// "a", "b" and "c" fresh, they are removed as a sweep would remove
	// them, and every run inserts them again: about one table rebuild (two
	// allocations) per six inserts per key, so close to one allocation per
	// run that AllocsPerRun's integer average rounded down to 0 in most
	// runs and up to 1 in some.
	x.token.Allow("a")
	x.token.Allow("b")
	x.ip.Allow("c")
	if n := testing.AllocsPerRun(1000, func() {
		x.allow("tok", "ip", 1)
		hotlimit.AllowLayers(
			hotlimit.Layer{Limiter: x.token, Key: "a", Cost: 1},
			hotlimit.Layer{Limiter: x.token, Key: "b", Cost: 1},
			hotlimit.Layer{Limiter: x.ip, Key: "c", Cost: 1},
			hotlimit.Layer{Limiter: x.global, Key: "d", Cost: 1<<20 + 1}, // denied: refunds 3
		)
	}); n != 0 {
		t.Fatalf("%v allocations per run, want 0", n)
	}
	// So does AllowLayersState, with no states and with room for them.
	states := make([]hotlimit.LayerState, 4)
	for _, st := range [][]hotlimit.LayerState{nil, states} {
		if n := testing.AllocsPerRun(1000, func() {
			hotlimit.AllowLayersState(st,
				hotlimit.Layer{Limiter: x.token, Key: "a", Cost: 1},
				hotlimit.Layer{Limiter: x.ip, Key: "c", Cost: 1},
				hotlimit.Layer{Limiter: x.global, Key: "d", Cost: 1<<20 + 1}, // denied: refunds 2
			)
		}); n != 0 {
			t.Fatalf("AllowLayersState with %d states: %v allocations per run, want 0", len(st), n)
		}
	}
}

// TestAdmissionRefund: Refund gives back an admission of a window in the
// same window and in the next one (the sliding window's previous count),
// and the part of a bucket admission that has not refilled; it gives back
// once, whatever the copies of the call; a Refund of the zero Admission or
// of a denial does nothing.
func TestAdmissionRefund(t *testing.T) {
	c := hotlimit.NewManualClock()
	sw := newLimiter(t, hotlimit.SlidingWindow{Limit: 10, Window: time.Second}, hotlimit.WithClock(c))
	var a, b hotlimit.Admission
	sw.AdmitN(&a, "k", 4)
	sw.AdmitN(&b, "k", 3)
	if !a.Refund() || a.Refund() {
		t.Fatal("Refund reported spending a filled Admission other than once")
	}
	if r := sw.AllowN("k", 0).Remaining; r != 7 {
		t.Fatalf("sliding, same window: remaining %d, want 7", r)
	}
	c.Advance(time.Second + time.Second/2) // half the previous window's weight left: ⌈3/2⌉ = 2 used
	if r := sw.AllowN("k", 0).Remaining; r != 8 {
		t.Fatalf("sliding, next window: remaining %d, want 8", r)
	}
	b.Refund() // off the previous window's count
	if d := sw.AllowN("k", 0); d.Remaining != 10 || sw.Len() != 0 {
		t.Fatalf("sliding, refund of the previous window: %+v and Len %d, want full and removed", d, sw.Len())
	}

	tb := newLimiter(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 3}, hotlimit.WithClock(c))
	c.Set(0)
	tb.AdmitN(&a, "k", 2) // TAT 2s
	tb.AllowN("k", 1)     // TAT 3s
	c.Advance(1500 * time.Millisecond)
	a.Refund() // 0.5 s of a's 2 s has not drained: TAT 2.5 s
	if d := tb.AllowN("k", 0); d.Remaining != 2 || d.ResetAfter != time.Second {
		t.Fatalf("token bucket after a partly refilled refund: %+v, want Remaining 2, ResetAfter 1s", d)
	}
	if d := tb.AdmitN(&a, "k", 3); d.Allowed || a.Refund() {
		t.Fatalf("a denied AdmitN (%+v) left something to Refund", d)
	}
	if d := tb.AdmitN(&a, "k", 0); !d.Allowed || a.Refund() {
		t.Fatalf("a peek through AdmitN (%+v) left something to Refund", d)
	}
	// AdmitN over a held Admission drops it: a Refund then gives back
	// the second admission only.
	fw := newLimiter(t, hotlimit.FixedWindow{Limit: 10, Window: time.Hour}, hotlimit.WithClock(c))
	fw.AdmitN(&a, "k", 3)
	fw.AdmitN(&a, "k", 2)
	a.Refund()
	if r := fw.AllowN("k", 0).Remaining; r != 7 {
		t.Fatalf("fixed window, Refund after two AdmitN on one Admission: remaining %d, want 7", r)
	}
	// An admission whose window has left the state gives nothing back to
	// a later window's count: the fixed window's next window, the sliding
	// window's window after next.
	for _, tc := range []struct {
		p     hotlimit.Policy
		after time.Duration
	}{
		{hotlimit.FixedWindow{Limit: 5, Window: time.Second}, time.Second},
		{hotlimit.SlidingWindow{Limit: 5, Window: time.Second}, 2 * time.Second},
	} {
		p := tc.p
		c.Set(0)
		l := newLimiter(t, p, hotlimit.WithClock(c))
		l.AdmitN(&a, "k", 2)
		c.Advance(tc.after)
		if d := l.AllowN("k", 5); !d.Allowed {
			t.Fatalf("%T: a later window's whole Limit was denied: %+v", p, d)
		}
		a.Refund()
		if d := l.AllowN("k", 1); d.Allowed {
			t.Fatalf("%T: the Refund of an expired window's admission gave back into a later window: %+v", p, d)
		}
	}
	var zero hotlimit.Admission
	if zero.Refund() {
		t.Fatal("the zero Admission's Refund reported spending it")
	}
}

// TestAllowLayersBindingWithCosts: the binding layer is the one that admits
// the fewest more requests, counting each layer's cost, and the Decision
// reports its Remaining and Limit.
func TestAllowLayersBindingWithCosts(t *testing.T) {
	c := hotlimit.NewManualClock()
	mk := limiterMaker(t, c)
	group := mk(hotlimit.FixedWindow{Limit: 5, Window: time.Hour})
	global := mk(hotlimit.FixedWindow{Limit: 9, Window: time.Hour})
	req := []hotlimit.Layer{{Limiter: group, Key: "g", Cost: 1}, {Limiter: global, Key: "all", Cost: 3}}
	// After one request: the group has 4 units (4 requests), the global 6
	// units (2 requests): the global binds.
	if d := hotlimit.AllowLayers(req...); !d.Allowed || d.Remaining != 6 || d.Limit != 9 {
		t.Fatalf("first: %+v, want Remaining 6 of the global's 9", d)
	}
	hotlimit.AllowLayers(req...)
	hotlimit.AllowLayers(req...)
	// The global is empty: denied until the window turns, reported with
	// the global's Remaining, not the group's 2.
	d := hotlimit.AllowLayers(req...)
	if d.Allowed || d.Remaining != 0 || d.Limit != 9 || d.RetryAfter != time.Hour {
		t.Fatalf("denied: %+v", d)
	}
	if r := group.AllowN("g", 0).Remaining; r != 2 {
		t.Fatalf("group remaining %d, want 2: the refused request took nothing", r)
	}
}

// TestAllowLayersStateIndex: the index names the binding layer where Limit
// cannot, two layers of the same capacity, when admitted and when denied,
// and the layer of a nil Limiter.
func TestAllowLayersStateIndex(t *testing.T) {
	c := hotlimit.NewManualClock()
	mk := limiterMaker(t, c)
	a := mk(hotlimit.FixedWindow{Limit: 4, Window: time.Hour})
	b := mk(hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 4})
	b.AllowN("k", 2) // b has 2 left, a has 4
	req := []hotlimit.Layer{{Limiter: a, Key: "k", Cost: 1}, {Limiter: b, Key: "k", Cost: 1}}
	steps := []struct {
		allowed   bool
		remaining int64
		index     int
	}{
		{true, 1, 1}, // a 3, b 1: b binds
		{true, 0, 1}, // a 2, b 0
		{false, 0, 1},
	}
	for i, s := range steps {
		d, idx := hotlimit.AllowLayersState(nil, req...)
		if d.Allowed != s.allowed || d.Remaining != s.remaining || d.Limit != 4 || idx != s.index {
			t.Fatalf("step %d: %+v, index %d; want allowed %v, remaining %d, index %d", i, d, idx, s.allowed, s.remaining, s.index)
		}
	}
	// Swapped order: still b, now at index 0.
	if d, idx := hotlimit.AllowLayersState(nil, req[1], req[0]); d.Allowed || idx != 0 {
		t.Fatalf("swapped: %+v, index %d; want denied by index 0", d, idx)
	}
	// a binds once it is the tighter one: a fresh key in b.
	req[1].Key = "fresh"
	if d, idx := hotlimit.AllowLayersState(nil, req...); !d.Allowed || d.Remaining != 1 || idx != 0 {
		t.Fatalf("a binds: %+v, index %d; want Remaining 1 (a had 2) at index 0", d, idx)
	}
	// Both deny: the one with the longer RetryAfter binds, although the
	// first in order is the one that refused.
	short := mk(hotlimit.FixedWindow{Limit: 1, Window: time.Minute})
	long := mk(hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1})
	short.Allow("k")
	long.Allow("k")
	if d, idx := hotlimit.AllowLayersState(nil, hotlimit.Layer{Limiter: short, Key: "k", Cost: 1}, hotlimit.Layer{Limiter: long, Key: "k", Cost: 1}); d.Allowed || d.RetryAfter != time.Hour || idx != 1 {
		t.Fatalf("both deny: %+v, index %d; want RetryAfter 1h from index 1", d, idx)
	}
	// A nil Limiter binds with Never, admitted or denied elsewhere.
	if d, idx := hotlimit.AllowLayersState(nil, req[0], hotlimit.Layer{Key: "x", Cost: 1}); d.Allowed || d.RetryAfter != hotlimit.Never || idx != 1 {
		t.Fatalf("nil layer: %+v, index %d", d, idx)
	}
	if _, idx := hotlimit.AllowLayersState(nil); idx != -1 {
		t.Fatalf("no layers: index %d, want -1", idx)
	}
}

// TestAllowLayersOneReading: layers whose limiters read the default clock
// are decided at one reading of it, so two fixed windows of one length
// report the same ResetAfter to the nanosecond (read apart, they differ
// by the time between the readings); a limiter with a clock of its own
// (WithClock) still reads that clock.
func TestAllowLayersOneReading(t *testing.T) {
	policy := hotlimit.FixedWindow{Limit: 1 << 40, Window: time.Hour}
	var lims [2]*hotlimit.Limiter
	for i := range lims {
		l, err := hotlimit.New(policy, hotlimit.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lims[i] = l
	}
	manual, err := hotlimit.New(policy, hotlimit.WithClock(hotlimit.NewManualClock()), hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer manual.Close()
	each := make([]hotlimit.LayerState, 3)
	for i := range 200 {
		key := fmt.Sprint("k", i) // a fresh key: its window ends when the clock's current one does
		d, _ := hotlimit.AllowLayersState(each,
			hotlimit.Layer{Limiter: lims[0], Key: key, Cost: 1},
			hotlimit.Layer{Limiter: manual, Key: key, Cost: 1},
			hotlimit.Layer{Limiter: lims[1], Key: key, Cost: 1})
		if !d.Allowed {
			t.Fatalf("request %d refused: %+v", i, d)
		}
		if a, b := each[0].Decision.ResetAfter, each[2].Decision.ResetAfter; a != b {
			t.Fatalf("request %d: ResetAfter %v and %v: the default clock was read twice", i, a, b)
		}
		if r := each[1].Decision.ResetAfter; r != time.Hour {
			t.Fatalf("request %d: the ManualClock's layer has ResetAfter %v, want 1h (its clock reads 0)", i, r)
		}
	}
}
