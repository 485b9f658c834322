package hotlimit_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotlimit/hotlimit"
)

// giveBackPolicies are one policy of each kind, each with a Limit of 5, on
// which 20 ms of a frozen clock refill two units of a bucket and turn no
// window.
var giveBackPolicies = map[string]hotlimit.Policy{
	"TokenBucket":   hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 5},
	"LeakyBucket":   hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(100), Capacity: 4},
	"FixedWindow":   hotlimit.FixedWindow{Limit: 5, Window: time.Hour},
	"SlidingWindow": hotlimit.SlidingWindow{Limit: 5, Window: time.Hour},
	"SlidingLog":    hotlimit.SlidingLog{Limit: 5, Window: time.Hour},
}

// drain admits unit requests for key until one is denied and returns how
// many were admitted.
func drain(t *testing.T, l *hotlimit.Limiter, key string) int64 {
	t.Helper()
	for n := int64(0); n <= 100; n++ {
		if !l.Allow(key).Allowed {
			return n
		}
	}
	t.Fatalf("%q admitted more than 100 unit requests at a frozen instant", key)
	return 0
}

// layeredGiveBack runs AllowLayers with user's key "k" (cost 2) first and
// a drained gate second, whose deny hook runs between the gate's refusal
// and the give-back of user's layer: there it calls during. It returns how
// many unit requests user admits for "k" right after, at the same instant.
func layeredGiveBack(t *testing.T, c *hotlimit.ManualClock, user *hotlimit.Limiter, during func()) int64 {
	t.Helper()
	gate := newLimiter(t, hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1}, hotlimit.WithClock(c),
		hotlimit.WithDenyHook(func(uint64, hotlimit.Decision) { during() }))
	gate.Allow("g")
	if d := hotlimit.AllowLayers(hotlimit.Layer{Limiter: user, Key: "k", Cost: 2}, hotlimit.Layer{Limiter: gate, Key: "g", Cost: 1}); d.Allowed {
		t.Fatalf("AllowLayers admitted through a drained layer: %+v", d)
	}
	return drain(t, user, "k")
}

// TestGiveBackAfterEviction: a layer admitted on an entry that eviction
// then removes gives nothing back to the key's re-created entry. The gate's
// deny hook evicts "k" (WithMaxKeys 1, or 4 holding 3 drained decoys), then
// drains the re-created "k"; at that frozen instant "k" must admit exactly
// Limit units in all, hook and after, not Limit plus the layer's cost.
func TestGiveBackAfterEviction(t *testing.T) {
	for name, p := range giveBackPolicies {
		for _, maxKeys := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/maxKeys=%d", name, maxKeys), func(t *testing.T) {
				c := hotlimit.NewManualClock()
				c.Set(time.Hour)
				user := newLimiter(t, p, hotlimit.WithClock(c), hotlimit.WithMaxKeys(maxKeys))
				for i := range maxKeys - 1 {
					user.AllowN(fmt.Sprint("decoy", i), 5)
				}
				var inHook int64
				after := layeredGiveBack(t, c, user, func() {
					user.Allow("other") // evicts k: the entry closest to fresh
					inHook = drain(t, user, "k")
				})
				if inHook+after != 5 {
					t.Fatalf("k admitted %d in the hook and %d after the give-back, at one instant; want 5 in all (Stats %+v)", inHook, after, user.Stats())
				}
			})
		}
	}
}

// TestGiveBackAfterRefill: a bucket's give-back never returns units that
// refilled after the admission. The gate's deny hook moves the clock on
// by 20 ms (two units of the buckets) and drains "k"; at that instant "k"
// must admit exactly Limit units in all, hook and after. With 10 ms (one
// unit), the give-back returns the one unit that had not refilled.
func TestGiveBackAfterRefill(t *testing.T) {
	for name, p := range giveBackPolicies {
		for _, step := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s/%v", name, step), func(t *testing.T) {
				c := hotlimit.NewManualClock()
				c.Set(time.Hour)
				user := newLimiter(t, p, hotlimit.WithClock(c))
				var inHook int64
				after := layeredGiveBack(t, c, user, func() {
					c.Advance(step)
					inHook = drain(t, user, "k")
				})
				if inHook+after != 5 {
					t.Fatalf("k admitted %d in the hook and %d after the give-back, at one instant; want 5 in all", inHook, after)
				}
			})
		}
	}
}

// TestWaitCancelledAfterEviction: a Wait that reserved a slot and sleeps,
// and whose context ends after eviction removed its key's entry and the
// key's new entry was drained, gives nothing back to the new entry.
func TestWaitCancelledAfterEviction(t *testing.T) {
	for _, p := range []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 5},
		hotlimit.LeakyBucket{Rate: hotlimit.PerHour(1), Capacity: 4},
	} {
		t.Run(fmt.Sprintf("%T", p), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, _ := newManual(t, p, hotlimit.WithMaxKeys(1))
				l.AllowN("k", 5)
				ctx, cancel := context.WithCancel(context.Background())
				errc := make(chan error)
				go func() { errc <- l.Wait(ctx, "k", 2) }()
				synctest.Wait()  // Wait has reserved its slot and sleeps
				l.Allow("other") // evicts k
				if d := l.AllowN("k", 5); !d.Allowed {
					t.Fatalf("the re-created key's whole quota was denied: %+v", d)
				}
				cancel()
				if err := <-errc; !errors.Is(err, context.Canceled) {
					t.Fatalf("Wait = %v, want context.Canceled", err)
				}
				if d := l.AllowN("k", 2); d.Allowed {
					t.Fatalf("admitted beyond the re-created key's quota: the cancelled Wait gave its slot back to it: %+v", d)
				}
			})
		})
	}
}

// TestRefundAfterRemoval: an Admission made on a key's entry that Reset or
// eviction then removed gives nothing back to the key's new entry: the
// new entry admits its whole Limit, and after the Refund not one unit
// more, for every policy (5 policies × Reset, WithMaxKeys 1, WithMaxKeys 4
// holding 3 drained decoys).
func TestRefundAfterRemoval(t *testing.T) {
	for name, p := range giveBackPolicies {
		for _, how := range []string{"Reset", "maxKeys=1", "maxKeys=4"} {
			t.Run(name+"/"+how, func(t *testing.T) {
				c := hotlimit.NewManualClock()
				c.Set(time.Hour)
				var l *hotlimit.Limiter
				switch how {
				case "Reset":
					l = newLimiter(t, p, hotlimit.WithClock(c))
				case "maxKeys=1":
					l = newLimiter(t, p, hotlimit.WithClock(c), hotlimit.WithMaxKeys(1))
				case "maxKeys=4":
					l = newLimiter(t, p, hotlimit.WithClock(c), hotlimit.WithMaxKeys(4))
					for i := range 3 {
						l.AllowN(fmt.Sprint("decoy", i), 5)
					}
				}
				var a hotlimit.Admission
				if d := l.AdmitN(&a, "k", 2); !d.Allowed {
					t.Fatalf("AdmitN(k, 2) = %+v", d)
				}
				if how == "Reset" {
					l.Reset("k")
				} else {
					l.Allow("other") // evicts k, the entry closest to fresh
				}
				if d := l.AllowN("k", 5); !d.Allowed {
					t.Fatalf("the new entry's whole Limit was denied: %+v", d)
				}
				if !a.Refund() {
					t.Fatal("Refund did not spend the Admission")
				}
				if d := l.AllowN("k", 1); d.Allowed {
					t.Fatalf("admitted beyond the new entry's Limit: the Refund gave back into it: %+v (Stats %+v)", d, l.Stats())
				}
				if st := l.Stats(); st.Refunded != 0 {
					t.Fatalf("Stats.Refunded = %d after a Refund that found another entry, want 0", st.Refunded)
				}
			})
		}
	}
}

// TestRefundOnce: concurrent Refunds of one Admission give it back once.
// Eight goroutines refund an admission of 2 on a key that then holds 5 of
// 5 (its own 2, 3 more); exactly one Refund reports spending it, and then
// exactly 2 more units are admitted, for every policy.
func TestRefundOnce(t *testing.T) {
	for name, p := range giveBackPolicies {
		t.Run(name, func(t *testing.T) {
			l, c := newManual(t, p)
			c.Set(time.Hour)
			var a hotlimit.Admission
			l.AdmitN(&a, "k", 2)
			l.AllowN("k", 3)
			var spent atomic.Int64
			inParallel(8, func(int) {
				if a.Refund() {
					spent.Add(1)
				}
			})
			if n := spent.Load(); n != 1 {
				t.Fatalf("%d Refunds reported spending the Admission, want 1", n)
			}
			if n := drain(t, l, "k"); n != 2 {
				t.Fatalf("%d admitted after the Refund of 2, want 2", n)
			}
		})
	}
}

// TestAdmitNAllocatesNothing: AdmitN and Refund on a key the limiter holds
// allocate nothing.
func TestAdmitNAllocatesNothing(t *testing.T) {
	for name, p := range giveBackPolicies {
		l := newLimiter(t, p)
		var a hotlimit.Admission
		l.Allow("user:123456")
		if n := testing.AllocsPerRun(1000, func() {
			l.AdmitN(&a, "user:123456", 1)
			a.Refund()
		}); n != 0 {
			t.Errorf("%s: %v allocations per AdmitN and Refund, want 0", name, n)
		}
	}
}

// TestAdmissionNotCopyable: go vet's copylocks check reports a copy of an
// Admission, as the type's doc says: a value of it holds a field whose
// pointer is a sync.Locker, the rule the check applies.
func TestAdmissionNotCopyable(t *testing.T) {
	var holdsLock func(reflect.Type) bool
	holdsLock = func(ty reflect.Type) bool {
		if reflect.PointerTo(ty).Implements(reflect.TypeFor[sync.Locker]()) {
			return true
		}
		if ty.Kind() == reflect.Struct {
			for i := range ty.NumField() {
				if holdsLock(ty.Field(i).Type) {
					return true
				}
			}
		}
		return false
	}
	if !holdsLock(reflect.TypeFor[hotlimit.Admission]()) {
		t.Fatal("go vet would not report a copy of an Admission")
	}
}

// TestResetOfAnotherKeyKeepsGiveBacks: a Reset or an eviction of one key
// leaves the give-backs of admissions on other keys whole: a layered
// request refused by its gate gives its unit back to "k" although "j" was
// reset (or evicted) in between, and so does an Admission's Refund.
func TestResetOfAnotherKeyKeepsGiveBacks(t *testing.T) {
	for name, p := range giveBackPolicies {
		t.Run(name, func(t *testing.T) {
			c := hotlimit.NewManualClock()
			c.Set(time.Hour)
			user := newLimiter(t, p, hotlimit.WithClock(c))
			user.AllowN("j", 5)
			after := layeredGiveBack(t, c, user, func() { user.Reset("j") })
			if after != 5 {
				t.Fatalf("k admitted %d after the layered request was refused, want 5: its give-back was lost", after)
			}
			var a hotlimit.Admission
			user.AllowN("j", 5)
			user.AdmitN(&a, "m", 3)
			user.Reset("j")
			a.Refund()
			if n := drain(t, user, "m"); n != 5 {
				t.Fatalf("m admitted %d after its Refund of 3 (Reset of j in between), want 5", n)
			}
			if st := user.Stats(); st.Refunded != 2 {
				t.Fatalf("Stats.Refunded = %d, want 2", st.Refunded)
			}
		})
	}
}
