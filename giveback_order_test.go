package hotlimit_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/refmodel"
)

// orderPolicies are the buckets of the give-back order tests: T = 100 ms,
// room for 4 units.
var orderPolicies = map[string]hotlimit.Policy{
	"TokenBucket": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 4},
	"LeakyBucket": hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 3},
}

// bigOrderPolicies are the same buckets with room for 40 units: room for
// more admissions held at once than an entry keeps renewals.
var bigOrderPolicies = map[string]hotlimit.Policy{
	"TokenBucket": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 40},
	"LeakyBucket": hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 39},
}

// TestGiveBackBelowLaterAdmissions: a bucket give-back that lands below a
// later admission moves that admission's units back in time, so once time
// has passed the later admission's give-back must not return units that
// have drained since. A and B each take 2 of 4; A is given back (B's units
// now sit where A's were); 200 ms later the bucket is full again and takes
// 4; B's give-back must not let 2 more in at that instant.
func TestGiveBackBelowLaterAdmissions(t *testing.T) {
	for name, p := range orderPolicies {
		t.Run(name, func(t *testing.T) {
			l, c := newManual(t, p)
			var a, b hotlimit.Admission
			if !l.AdmitN(&a, "k", 2).Allowed || !l.AdmitN(&b, "k", 2).Allowed {
				t.Fatal("the first 4 units were refused")
			}
			if !a.Refund() {
				t.Fatal("A's Refund did not spend it")
			}
			c.Advance(200 * time.Millisecond)
			got := drain(t, l, "k")
			if !b.Refund() {
				t.Fatal("B's Refund did not spend it")
			}
			got += drain(t, l, "k")
			if got != 4 {
				t.Fatalf("admitted %d at one instant after the refill; the bucket holds 4", got)
			}
		})
	}
}

// TestGiveBackAtOneInstantInAnyOrder: at one frozen instant, give-backs
// below later admissions lose nothing, in any order: every unit comes back.
func TestGiveBackAtOneInstantInAnyOrder(t *testing.T) {
	for name, p := range orderPolicies {
		t.Run(name, func(t *testing.T) {
			for _, order := range [][]int{{0, 1, 2, 3}, {1, 3, 0, 2}, {0, 2, 1, 3}, {2, 0, 3, 1}, {3, 2, 1, 0}} {
				l, c := newManual(t, p)
				c.Set(time.Hour)
				var adm [4]hotlimit.Admission
				for i := range adm {
					if !l.AdmitN(&adm[i], "k", 1).Allowed {
						t.Fatal("refused within the burst")
					}
				}
				for _, i := range order {
					adm[i].Refund()
				}
				if got := drain(t, l, "k"); got != 4 {
					t.Fatalf("order %v: %d admitted after every give-back; want 4", order, got)
				}
			}
		})
	}
}

// exactBucket is the give-back rule's reference: a bucket's debt as a
// stack of the time each admission holds, in the limiter's clock. An
// admission of cost c at now holds [max(TAT, now), that + c·T); a unit
// drains at the end of its time. Giving an admission back removes what
// it still holds after now, and the time of every later admission above
// it moves down by as much. A limiter whose TAT is ever below this one's
// has let a key admit more than its policy allows.
type exactBucket struct {
	t    int64
	held map[int][2]int64 // by admission id: [from, to)
}

func (b *exactBucket) tat() int64 {
	var top int64
	for _, h := range b.held {
		top = max(top, h[1])
	}
	return top
}

func (b *exactBucket) admit(id int, now, cost int64) {
	from := max(b.tat(), now)
	b.held[id] = [2]int64{from, from + cost*b.t}
}

func (b *exactBucket) giveBack(id int, now int64) {
	h := b.held[id]
	delete(b.held, id)
	owed := h[1] - max(h[0], now)
	if owed <= 0 {
		return
	}
	for j, o := range b.held {
		if o[0] >= h[1] {
			b.held[j] = [2]int64{o[0] - owed, o[1] - owed}
		}
	}
	b.held[id] = [2]int64{h[0], h[1] - owed} // what drained stays consumed
}

// TestGiveBackNeverBelowExact drives a bucket with admissions (some
// recorded with AdmitN), give-backs of the recorded ones in random order
// and a clock that moves, and after each step compares the key's debt
// (ResetAfter of a peek) with exactBucket's: equal, while an admission
// has seen no more renewals than the entry keeps (on buckets of 4, where
// few admissions are held at once), and at every step on a frozen clock;
// never less (that would be an overspend) once admissions outlive the
// renewals kept and are given back from the floor (on buckets of 40,
// giving back the newest more often). The reference model, driven alike,
// must decide and owe exactly as the limiter does.
func TestGiveBackNeverBelowExact(t *testing.T) {
	for name := range orderPolicies {
		for _, moving := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/moving=%v", name, moving), func(t *testing.T) {
				for seed := range uint64(200) {
					checkGiveBacksAgainstExact(t, orderPolicies[name], moving, true, 60, seed)
				}
				for seed := range uint64(20) {
					checkGiveBacksAgainstExact(t, bigOrderPolicies[name], moving, !moving, 400, seed)
				}
			})
		}
	}
}

// checkGiveBacksAgainstExact runs one sequence of steps (see
// TestGiveBackNeverBelowExact), requiring the key's debt to equal the
// exact one, or with exact false to be no less.
func checkGiveBacksAgainstExact(t *testing.T, p hotlimit.Policy, moving, exact bool, steps int, seed uint64) {
	t.Helper()
	l, c := newManual(t, p)
	c.Set(time.Hour)
	r := rand.New(rand.NewPCG(seed, 22))
	x := &exactBucket{t: int64(100 * time.Millisecond), held: map[int][2]int64{}}
	m := refmodel.New(p, c)
	adm := map[int]*hotlimit.Admission{}
	madm := map[int]refmodel.Admission{}
	var log []string
	for step := range steps {
		now := int64(c.Now())
		switch k := r.IntN(10); {
		case k < 4:
			a := new(hotlimit.Admission)
			cost := 1 + r.Int64N(2)
			d := l.AdmitN(a, "k", cost)
			md, ma := m.AdmitN("k", cost)
			if d != md {
				t.Fatalf("seed %d: AdmitN %d: %+v, the model %+v, after:\n%v", seed, cost, d, md, log)
			}
			if d.Allowed {
				adm[step], madm[step] = a, ma
				x.admit(step, now, cost)
				log = append(log, fmt.Sprintf("#%d AdmitN %d @%v", step, cost, c.Now()))
			}
		case k < 5:
			d := l.Allow("k")
			if md := m.Allow("k"); d != md {
				t.Fatalf("seed %d: Allow: %+v, the model %+v, after:\n%v", seed, d, md, log)
			}
			if d.Allowed {
				x.admit(-1-step, now, 1) // never given back
				log = append(log, fmt.Sprintf("#%d Allow @%v", step, c.Now()))
			}
		case k < 8 && len(adm) > 0:
			ids := make([]int, 0, len(adm))
			for id := range adm {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			id := ids[r.IntN(len(ids))]
			if steps > 60 && r.IntN(2) == 0 {
				id = ids[len(ids)/2+r.IntN(len(ids)-len(ids)/2)] // a newer one
			}
			adm[id].Refund()
			m.GiveBack(madm[id])
			delete(adm, id)
			x.giveBack(id, now)
			log = append(log, fmt.Sprintf("#%d Refund #%d @%v", step, id, c.Now()))
		case moving:
			c.Advance(time.Duration(r.Int64N(int64(150*time.Millisecond) * int64(steps/60))))
		}
		got := int64(l.AllowN("k", 0).ResetAfter)
		want := max(0, x.tat()-int64(c.Now()))
		if got < want || exact && got != want {
			t.Fatalf("seed %d: the key owes %v, the exact give-backs %v, after:\n%v", seed, time.Duration(got), time.Duration(want), log)
		}
		if md := m.Peek("k"); int64(md.ResetAfter) != got {
			t.Fatalf("seed %d: the key owes %v, the model %v, after:\n%v", seed, time.Duration(got), md.ResetAfter, log)
		}
	}
}

// TestRefundsOutOfOrderExact: 8 goroutines on one key at a frozen
// instant, each holding up to three Admissions and giving back a random
// one of them (so most give-backs land below later admissions, renewing
// the entry while other goroutines admit and give back without a lock),
// and keeping some. Once all have returned, what was kept plus what the
// key has left (a peek's Remaining) is exactly its Limit: no give-back
// lost a unit or returned one twice.
func TestRefundsOutOfOrderExact(t *testing.T) {
	for name, p := range map[string]hotlimit.Policy{
		"TokenBucket":   hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 200},
		"LeakyBucket":   hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(100), Capacity: 199},
		"FixedWindow":   hotlimit.FixedWindow{Limit: 200, Window: time.Hour},
		"SlidingWindow": hotlimit.SlidingWindow{Limit: 200, Window: time.Hour},
		"SlidingLog":    hotlimit.SlidingLog{Limit: 200, Window: time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			for round := range 10 {
				l, c := newManual(t, p)
				c.Set(time.Hour + 7*time.Millisecond)
				var kept atomic.Int64
				inParallel(8, func(g int) {
					r := rand.New(rand.NewPCG(uint64(round), uint64(g)))
					var held []*hotlimit.Admission
					for range 150 {
						if len(held) < 3 {
							a := new(hotlimit.Admission)
							if l.AdmitN(a, "k", 1).Allowed {
								held = append(held, a)
							}
							continue
						}
						i := r.IntN(len(held))
						if r.IntN(16) == 0 {
							kept.Add(1)
						} else if !held[i].Refund() {
							t.Error("the first Refund of an admission did not spend it")
						}
						held = slices.Delete(held, i, i+1)
					}
					for _, a := range held {
						a.Refund()
					}
				})
				if n, left := kept.Load(), l.AllowN("k", 0).Remaining; n+left != l.Limit() {
					t.Fatalf("round %d: %d admissions kept and %d units left, want %d in all (%+v)", round, n, left, l.Limit(), l.Stats())
				}
			}
		})
	}
}

// TestGiveBackOlderThanTheRenewalsKept: an admission that has seen more
// renewals than its entry keeps is given back from their floor, the lowest
// point any of them removed time from: B, A and C take 1 unit each; 20
// admissions above them are each given back below another (20 renewals,
// more than are kept); B is given back below A (a renewal kept, which
// moves A down to where B was); 100 ms later A has drained, and its
// give-back must return nothing: the key owes exactly what the exact
// stack of each admission's time owes.
func TestGiveBackOlderThanTheRenewalsKept(t *testing.T) {
	for name, p := range bigOrderPolicies {
		t.Run(name, func(t *testing.T) {
			l, c := newManual(t, p)
			c.Set(time.Hour)
			x := &exactBucket{t: int64(100 * time.Millisecond), held: map[int][2]int64{}}
			var adm [3]hotlimit.Admission // B, A, C
			for i := range adm {
				l.AdmitN(&adm[i], "k", 1)
				x.admit(i, int64(c.Now()), 1)
			}
			for i := range 20 {
				var lo, hi hotlimit.Admission
				l.AdmitN(&lo, "k", 1)
				x.admit(10+2*i, int64(c.Now()), 1)
				l.AdmitN(&hi, "k", 1)
				x.admit(11+2*i, int64(c.Now()), 1)
				lo.Refund() // below hi: a renewal
				x.giveBack(10+2*i, int64(c.Now()))
				hi.Refund()
				x.giveBack(11+2*i, int64(c.Now()))
			}
			adm[0].Refund() // B, below A and C
			x.giveBack(0, int64(c.Now()))
			c.Advance(100 * time.Millisecond)
			adm[1].Refund() // A, now where B was: drained
			x.giveBack(1, int64(c.Now()))
			if got, want := l.AllowN("k", 0).ResetAfter, time.Duration(max(0, x.tat()-int64(c.Now()))); got != want {
				t.Fatalf("the key owes %v after A's give-back; the exact stack owes %v", got, want)
			}
		})
	}
}
