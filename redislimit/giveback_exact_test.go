package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/hotlimit/hotlimit/internal/refmodel"
	"github.com/redis/go-redis/v9"
)

// exactPolicies are the policies of the give-back tests against the
// reference model: small buckets, where most give-backs land below later
// admissions, buckets holding more admissions at once than a key keeps
// renewals (ops.lua, "Renewals"), and every other policy.
var exactPolicies = []hotlimit.Policy{
	hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 4},
	hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 3},
	hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 40},
	hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 39},
	hotlimit.TokenBucket{Rate: hotlimit.PerMinute(6), Burst: 5},
	hotlimit.FixedWindow{Limit: 5, Window: time.Second},
	hotlimit.SlidingWindow{Limit: 5, Window: time.Second},
	hotlimit.SlidingWindow{Limit: 7, Window: 3 * time.Millisecond},
	hotlimit.SlidingLog{Limit: 5, Window: time.Second},
	hotlimit.SlidingLog{Limit: 40, Window: 3 * time.Millisecond},
}

// TestGiveBackAgainstModel runs random traces through redislimit and
// internal/refmodel (the rule hotlimit's give-backs follow) on one manual
// clock: admissions recorded with AdmitN (and, on the buckets, Wait's
// reservations), unrecorded ones, give-backs of any admission held in any
// order (on the big buckets more often a newer one, so that admissions
// outlive the renewals kept), Resets, and a clock that moves forward and
// back. Every decision and every state must be the model's: a give-back
// that returns less than the model's (today's voiding rule did, below
// later admissions) or more fails at the step after it.
//
// The clock goes back no earlier than its latest reading before the
// latest give-back or Reset: the model decides a key it removed no earlier
// than the removal (refmodel's sweptAt), where Redis, which deletes the
// key, decides at the reading.
func TestGiveBackAgainstModel(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	for pi, policy := range exactPolicies {
		t.Run(fmt.Sprintf("%d_%T", pi, policy), func(t *testing.T) {
			for seed := range uint64(8) {
				checkAgainstModel(t, c, policy, seed)
			}
		})
	}
}

// modelHeld is one admission held by both sides.
type modelHeld struct {
	remote *Admission
	model  refmodel.Admission
	what   string
}

func checkAgainstModel(t *testing.T, c redis.Scripter, policy hotlimit.Policy, seed uint64) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 33))
	clock, m, l := modelTwin(t, c, "exact", policy)
	limit, per := l.spec.limit, period(policy)
	bucket := l.spec.kind == kindTokenBucket
	// Big buckets: one key, more steps and a clock that moves less, so
	// that admissions outlive the renewals kept. Odd seeds freeze the
	// clock: every give-back is then exact, from the floor too.
	big, moving := limit >= 40, seed%2 == 0
	keys, steps := []string{"a", "b"}, 250
	if big {
		keys, steps = keys[:1], 600
	}
	var held []modelHeld
	var trace []string
	hi, floor := clock.Now(), clock.Now() // the latest reading; the earliest a move back may reach
	fail := func(format string, args ...any) {
		t.Helper()
		last := trace[max(0, len(trace)-40):]
		t.Fatalf("seed %d: %s\nafter (the last %d steps):\n%s", seed, fmt.Sprintf(format, args...), len(last), strings.Join(last, "\n"))
	}
	for step := range steps {
		key := keys[rng.IntN(len(keys))]
		at := clock.Now() / time.Microsecond
		switch r := rng.IntN(20); {
		case r < 3 && moving && (!big || r == 0):
			clock.Advance(time.Duration(rng.Int64N(per/3+1)) * time.Microsecond)
			trace = append(trace, fmt.Sprintf("#%d advance to %d", step, clock.Now()/time.Microsecond))
		case r == 3 && moving:
			if back := time.Duration(rng.Int64N(per/2+1)) * time.Microsecond; clock.Now()-back >= floor {
				clock.Advance(-back)
				trace = append(trace, fmt.Sprintf("#%d back to %d", step, clock.Now()/time.Microsecond))
			}
		case r == 4 && step%3 == 0:
			m.Reset(key)
			if err := l.Reset(ctx, key); err != nil {
				t.Fatal(err)
			}
			floor = hi
			trace = append(trace, fmt.Sprintf("#%d Reset %q @%d", step, key, at))
		case r < 11 && len(held) > 0:
			i := rng.IntN(len(held))
			if big && rng.IntN(2) == 0 {
				i = len(held)/2 + rng.IntN(len(held)-len(held)/2) // a newer one
			}
			h := held[i]
			held = slices.Delete(held, i, i+1)
			m.GiveBack(h.model)
			if ok, err := h.remote.Refund(ctx); err != nil || !ok {
				fail("Refund of %s: %v, %v", h.what, ok, err)
			}
			floor = hi
			trace = append(trace, fmt.Sprintf("#%d Refund %s @%d", step, h.what, at))
		case r < 13 && bucket:
			cost := 1 + rng.Int64N(min(limit, 3))
			maxWait := rng.Int64N(per + 1)
			ok, ma := m.ReserveWithin(key, cost, maxWait*int64(time.Microsecond))
			rep, err := l.op(ctx, "reserve", key, cost, maxWait)
			if err != nil {
				t.Fatal(err)
			}
			if got := rep[0] == 1; got != ok {
				fail("reserve %q %d within %dµs: %v, the model %v", key, cost, maxWait, rep, ok)
			}
			if ok {
				what := fmt.Sprintf("#%d (reserve %q %d)", step, key, cost)
				held = append(held, modelHeld{&Admission{l: l, key: key, inc: rep[2], mark: rep[3], cost: cost}, ma, what})
			}
			trace = append(trace, fmt.Sprintf("#%d reserve %q %d within %d: %v @%d", step, key, cost, maxWait, ok, at))
		case r < 14:
			cost := 1 + rng.Int64N(min(limit, 3))
			want := m.AllowN(key, cost)
			got := must(l.AllowN(ctx, key, cost))
			if !sameDecision(want, got) {
				fail("AllowN %q %d:\n redis %+v\n model %+v", key, cost, got, want)
			}
			trace = append(trace, fmt.Sprintf("#%d AllowN %q %d: %v @%d", step, key, cost, got.Allowed, at))
		default:
			cost := 1 + rng.Int64N(min(limit, 3))
			a := new(Admission)
			want, ma := m.AdmitN(key, cost)
			got := must(l.AdmitN(ctx, a, key, cost))
			if !sameDecision(want, got) {
				fail("AdmitN %q %d:\n redis %+v\n model %+v", key, cost, got, want)
			}
			if got.Allowed {
				held = append(held, modelHeld{a, ma, fmt.Sprintf("#%d (AdmitN %q %d)", step, key, cost)})
			}
			trace = append(trace, fmt.Sprintf("#%d AdmitN %q %d: %v @%d", step, key, cost, got.Allowed, at))
		}
		hi = max(hi, clock.Now())
		for _, k := range keys {
			if want, got := m.Peek(k), must(l.AllowN(ctx, k, 0)); !sameDecision(want, got) {
				fail("state of %q:\n redis %+v\n model %+v\n model's state %s", k, got, want, m)
			}
		}
	}
}

// TestGiveBackConcurrent: 4 limiters, each with its own client (4
// instances of a service), and 64 goroutines on each admit and give back
// on one key at a frozen instant: each goroutine holds up to three
// admissions, gives back a random one of them (so that most bucket
// give-backs land below later admissions while other goroutines admit and
// give back) and keeps some. The units held at once, counted from the
// callers' side, never pass the policy's limit, and once all have
// returned what was kept plus what the key has left (a peek's Remaining)
// is exactly the limit: every refundable unit came back, none twice. On
// one server and on the Cluster.
func TestGiveBackConcurrent(t *testing.T) {
	policies := []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 400},
		hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(100), Capacity: 399},
		hotlimit.FixedWindow{Limit: 400, Window: time.Hour},
		hotlimit.SlidingWindow{Limit: 400, Window: time.Hour},
		hotlimit.SlidingLog{Limit: 400, Window: time.Hour},
	}
	for _, where := range []string{"server", "cluster"} {
		t.Run(where, func(t *testing.T) {
			clients := make([]redis.Scripter, 4)
			for i := range clients {
				if where == "server" {
					clients[i] = redistest.Client(t, redistest.Addr(t))
				} else {
					clients[i] = redistest.ClusterClient(t, redistest.ClusterAddrs(t))
				}
			}
			for _, policy := range policies {
				t.Run(fmt.Sprintf("%T", policy), func(t *testing.T) {
					concurrentGiveBacks(t, clients, policy)
				})
			}
		})
	}
}

func concurrentGiveBacks(t *testing.T, clients []redis.Scripter, policy hotlimit.Policy) {
	const goroutines, rounds = 64, 24
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	lims := make([]*Limiter, len(clients))
	for i, c := range clients {
		lims[i] = must(New(c, "conc", policy, WithPrefix(prefix), WithTimeout(20*time.Second)))
		lims[i].testNow = func() int64 { return baseMicros }
	}
	limit := lims[0].spec.limit
	var out, kept, given, denied atomic.Int64 // units held now, kept for good, given back; denials
	var wg sync.WaitGroup
	for li, l := range lims {
		for g := range goroutines {
			wg.Go(func() {
				type adm struct {
					a    *Admission
					cost int64
				}
				r := rand.New(rand.NewPCG(uint64(li), uint64(g)))
				var held []adm
				giveBack := func(h adm) {
					out.Add(-h.cost) // before the give-back: out never counts more than the key holds
					if ok, err := h.a.Refund(ctx); err != nil || !ok {
						t.Errorf("Refund: %v, %v", ok, err)
					}
					given.Add(h.cost)
				}
				for range rounds {
					if len(held) == 0 || len(held) < 3 && r.IntN(2) == 0 {
						h := adm{new(Admission), 1 + r.Int64N(2)}
						d, err := l.AdmitN(ctx, h.a, "k", h.cost)
						if err != nil {
							t.Error(err)
							return
						}
						if !d.Allowed {
							denied.Add(1)
						} else {
							if n := out.Add(h.cost); n > limit {
								t.Errorf("%d units held at once, against a limit of %d", n, limit)
							}
							held = append(held, h)
						}
						continue
					}
					i := r.IntN(len(held))
					if r.IntN(64) == 0 {
						kept.Add(held[i].cost)
					} else {
						giveBack(held[i])
					}
					held = slices.Delete(held, i, i+1)
				}
				for _, h := range held {
					giveBack(h)
				}
			})
		}
	}
	wg.Wait()
	d := must(lims[0].AllowN(ctx, "k", 0))
	t.Logf("%d units kept, %d given back, %d admissions denied, %d left of %d", kept.Load(), given.Load(), denied.Load(), d.Remaining, limit)
	if lost := limit - kept.Load() - d.Remaining; lost != 0 {
		t.Fatalf("%d units kept, %d given back, %d left of %d: %d lost (negative: given back more than once)",
			kept.Load(), given.Load(), d.Remaining, limit, lost)
	}
	if given.Load() == 0 || denied.Load() == 0 {
		t.Fatalf("%d units given back, %d admissions denied: the key was never contended", given.Load(), denied.Load())
	}
}

// TestGiveBackOlderThanTheRenewalsKept: an admission that has seen more
// renewals than its key keeps is given back from their floor. B, A and C
// take 1 unit each; 20 admissions above them are each given back below
// another (20 renewals, more than are kept); B is given back below A (a
// renewal kept, which moves A down to where B was); 100 ms later A has
// drained, and its give-back must return nothing; C's returns what the
// floor allows. The key owes what the model owes, at each step (at A's
// give-back, what the exact stack of each admission's time owes).
func TestGiveBackOlderThanTheRenewalsKept(t *testing.T) {
	ctx := context.Background()
	for _, policy := range []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 40},
		hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 39},
	} {
		t.Run(fmt.Sprintf("%T", policy), func(t *testing.T) {
			clock, m, l := modelTwin(t, redistest.Client(t, redistest.Addr(t)), "older", policy)
			admit := func() modelHeld {
				a := new(Admission)
				must(l.AdmitN(ctx, a, "k", 1))
				_, ma := m.AdmitN("k", 1)
				return modelHeld{remote: a, model: ma}
			}
			giveBack := func(h modelHeld, what string) {
				t.Helper()
				must(h.remote.Refund(ctx))
				m.GiveBack(h.model)
				if want, got := m.Peek("k"), must(l.AllowN(ctx, "k", 0)); !sameDecision(want, got) {
					t.Fatalf("after %s's give-back:\n redis %+v\n model %+v", what, got, want)
				}
			}
			b, a, cc := admit(), admit(), admit()
			for range 20 {
				lo, hi := admit(), admit()
				giveBack(lo, "a lower one") // below hi: a renewal
				giveBack(hi, "a higher one")
			}
			giveBack(b, "B") // below A and C
			clock.Advance(100 * time.Millisecond)
			giveBack(a, "A")  // now where B was: drained
			giveBack(cc, "C") // from the floor too: less than it holds, as in the model
		})
	}
}

// TestRenewalsBounded: a key's renewals stay bounded in Redis and expire
// with its state. After 100 give-backs below later admissions the
// incarnation key holds the latest 16 renewals (and a floor), no more,
// with a TTL no longer than the longest the state had; a Reset leaves the
// incarnation alone.
func TestRenewalsBounded(t *testing.T) {
	ctx := context.Background()
	now := int64(baseMicros)
	policy := hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 4}
	l := frozen(t, policy, &now)
	c := redistest.Client(t, redistest.Addr(t))
	ik := l.incKey("k")
	var longest int64
	for range 100 {
		var lo, hi Admission
		must(l.AdmitN(ctx, &lo, "k", 1))
		must(l.AdmitN(ctx, &hi, "k", 1))
		longest = max(longest, c.PTTL(ctx, l.RedisKey("k")).Val().Milliseconds())
		must(lo.Refund(ctx)) // below hi: a renewal
		now += 100_000       // one T: the units before drain, hi's stay
	}
	v := c.Get(ctx, ik).Val()
	if n := len(strings.Fields(v)); n != 4+3*16 {
		t.Fatalf("incarnation key %q: %d numbers; want the incarnation, the floor's 3 and 16 renewals of 3", v, n)
	}
	size, state := c.MemoryUsage(ctx, ik).Val(), c.MemoryUsage(ctx, l.RedisKey("k")).Val()
	t.Logf("MEMORY USAGE: incarnation key with 16 renewals %d bytes (%d of value), the state %d", size, len(v), state)
	if size > 1024 {
		t.Fatalf("incarnation key: %d bytes in Redis", size)
	}
	if ttl := c.PTTL(ctx, ik).Val().Milliseconds(); ttl <= 0 || ttl > longest {
		t.Fatalf("incarnation key's TTL %dms; want at most the state's longest, %dms", ttl, longest)
	}
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if v := c.Get(ctx, ik).Val(); len(strings.Fields(v)) != 1 {
		t.Fatalf("incarnation key after Reset: %q; want the incarnation alone", v)
	}
}

// TestGiveBackFloorStartsAfresh: a key's floor a bucket's length or more
// behind the clock starts afresh from the next renewal dropped, so that
// later admissions older than the renewals kept are given back from a
// recent floor, not one from which nothing can be given back any more.
// At t0, 17 give-backs below later admissions (one more than the key
// keeps) make a floor near t0. At t1 = t0 + 5 s (the bucket is 4 s long),
// Z is held, a renewal R1, then X is admitted, then 17 renewals more, which
// drop R1 (the floor starts afresh there, near t1) and the one after X.
// X's give-back, from the floor, returns its unit: the key owes what the
// model owes (with a floor kept from t0, X would give nothing back).
func TestGiveBackFloorStartsAfresh(t *testing.T) {
	ctx := context.Background()
	policy := hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 40}
	clock, m, l := modelTwin(t, redistest.Client(t, redistest.Addr(t)), "afresh", policy)
	admit := func() modelHeld {
		a := new(Admission)
		if d := must(l.AdmitN(ctx, a, "k", 1)); !d.Allowed {
			t.Fatalf("refused: %+v", d)
		}
		_, ma := m.AdmitN("k", 1)
		return modelHeld{remote: a, model: ma}
	}
	same := func(what string) {
		t.Helper()
		if want, got := m.Peek("k"), must(l.AllowN(ctx, "k", 0)); !sameDecision(want, got) {
			t.Fatalf("after %s:\n redis %+v\n model %+v", what, got, want)
		}
	}
	giveBack := func(h modelHeld, what string) {
		t.Helper()
		must(h.remote.Refund(ctx))
		m.GiveBack(h.model)
		same(what)
	}
	renewals := func(n int) {
		t.Helper()
		for range n {
			lo, hi := admit(), admit()
			giveBack(lo, "a give-back below a later admission")
			giveBack(hi, "the later admission's give-back")
		}
	}
	admit() // held at t0
	renewals(17)
	clock.Advance(5 * time.Second)
	admit() // Z, held at t1: the key is never left fresh
	renewals(1)
	x := admit()
	renewals(17)
	before := must(l.AllowN(ctx, "k", 0)).Remaining
	giveBack(x, "X")
	if after := must(l.AllowN(ctx, "k", 0)).Remaining; after != before+1 {
		t.Fatalf("X's give-back: Remaining %d → %d; want its unit back", before, after)
	}
}

// modelTwin returns a ManualClock at baseMicros, the reference model of
// policy on it, and a limiter named name on c whose scripts decide at the
// clock's reading: the pair a differential test drives in step.
func modelTwin(t *testing.T, c redis.Scripter, name string, policy hotlimit.Policy) (*hotlimit.ManualClock, *refmodel.Model, *Limiter) {
	t.Helper()
	clock := hotlimit.NewManualClock()
	clock.Set(baseMicros * time.Microsecond)
	l := must(New(c, name, policy, WithPrefix(redistest.Prefix(t)), WithTimeout(5*time.Second)))
	l.testNow = func() int64 { return int64(clock.Now() / time.Microsecond) }
	return clock, refmodel.New(policy, clock), l
}
