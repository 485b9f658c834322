package hotlimit_test

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// statsWatch checks that a limiter's counters never go down: every
// field of Stats but the gauge Keys, found by reflection so that a counter
// added later is checked too. It is safe for concurrent use.
type statsWatch struct {
	t    testing.TB
	l    *hotlimit.Limiter
	mu   sync.Mutex
	last hotlimit.Stats
	errs int // reported so far; a broken counter reports the first few only
}

// scrape reads l's Stats, as a monitoring system would, and reports a
// counter that is below the previous reading's.
func (w *statsWatch) scrape(when string) hotlimit.Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.l.Stats()
	prev, cur := reflect.ValueOf(w.last), reflect.ValueOf(st)
	for i := range cur.NumField() {
		name := cur.Type().Field(i).Name
		if name == "Keys" {
			continue
		}
		if p, c := prev.Field(i).Uint(), cur.Field(i).Uint(); c < p && w.errs < 5 {
			w.errs++
			w.t.Errorf("%s: Stats.%s went down from %d to %d", when, name, p, c)
		}
	}
	w.last = st
	return st
}

// hookCtx is a context that is not done when Wait checks it first, and
// done when Wait sleeps: Wait then gives its reserved slot back at once,
// without depending on real time. Done reads the limiter's Stats first,
// between the reservation and the refund.
type hookCtx struct {
	context.Context
	onDone func()
	done   chan struct{}
	asked  bool
}

func (c *hookCtx) Done() <-chan struct{} {
	if !c.asked {
		c.asked = true
		c.onDone()
		close(c.done)
	}
	return c.done
}

func (c *hookCtx) Err() error {
	if c.asked {
		return context.Canceled
	}
	return nil
}

// TestStatsMonotonicUnderRefunds reads the counters in the middle of each
// kind of refund, where an admission is counted and not yet given back:
// inside the denying layer's deny hook (AllowLayers), inside the
// context's Done (Wait) and around Refund; and from scraping goroutines
// while others refund. No counter may go down, and the final counts are
// exact.
func TestStatsMonotonicUnderRefunds(t *testing.T) {
	for _, group := range []hotlimit.Policy{
		hotlimit.FixedWindow{Limit: 1 << 40, Window: time.Hour},
		hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1 << 20},
		hotlimit.SlidingLog{Limit: 1024, Window: time.Hour},
	} {
		t.Run(reflect.TypeOf(group).Name(), func(t *testing.T) {
			clock := hotlimit.NewManualClock()
			clock.Set(time.Hour)
			mk := func(p hotlimit.Policy, opts ...hotlimit.Option) *hotlimit.Limiter {
				l, err := hotlimit.New(p, append(opts, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				return l
			}
			var gw *statsWatch
			g := mk(group)
			gw = &statsWatch{t: t, l: g}
			// The global layer admits one request per hour; each denial
			// scrapes the group limiter, whose layer has admitted and is
			// about to be given back.
			global := mk(hotlimit.FixedWindow{Limit: 1, Window: time.Hour},
				hotlimit.WithDenyHook(func(uint64, hotlimit.Decision) { gw.scrape("in the deny hook") }))

			const workers, each = 2, 300
			var wg sync.WaitGroup
			stop := make(chan struct{})
			var scrapers sync.WaitGroup
			for range 2 {
				scrapers.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
							gw.scrape("concurrent scrape")
						}
					}
				})
			}
			for w := range workers {
				wg.Go(func() {
					key := string(rune('a' + w))
					for range each {
						hotlimit.AllowLayers(
							hotlimit.Layer{Limiter: g, Key: key, Cost: 1},
							hotlimit.Layer{Limiter: global, Key: "all", Cost: 1},
						)
						gw.scrape("after AllowLayers")
					}
				})
			}
			wg.Wait()
			close(stop)
			scrapers.Wait()

			// Refund: an admission, a scrape, its refund, a scrape.
			var adm hotlimit.Admission
			g.AdmitN(&adm, "r", 1)
			gw.scrape("before Refund")
			adm.Refund()
			gw.scrape("after Refund")

			st := gw.scrape("end")
			want := hotlimit.Stats{
				Allowed:  workers*each + 1,
				Refunded: workers*each - 1 + 1, // every layered request but the one the global layer admitted
				Keys:     st.Keys,
				Swept:    st.Swept,
			}
			if st != want {
				t.Errorf("Stats = %+v, want %+v", st, want)
			}
			if gs := global.Stats(); gs.Allowed != 1 || gs.Denied != workers*each-1 || gs.Refunded != 0 {
				t.Errorf("global Stats = %+v, want 1 allowed, %d denied, 0 refunded", gs, workers*each-1)
			}
		})
	}
}

// TestStatsMonotonicWaitRefund: a Wait whose context ends while it sleeps
// gives its slot back; the reservation stays counted as Allowed and the
// refund is counted as Refunded.
func TestStatsMonotonicWaitRefund(t *testing.T) {
	clock := hotlimit.NewManualClock()
	l, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1},
		hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w := &statsWatch{t: t, l: l}
	l.Allow("k") // the bucket is empty: the next Wait reserves an hour ahead
	w.scrape("before Wait")
	ctx := &hookCtx{Context: context.Background(), done: make(chan struct{}), onDone: func() { w.scrape("while Wait sleeps") }}
	if err := l.Wait(ctx, "k", 1); err != context.Canceled {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	st := w.scrape("after Wait")
	if st.Allowed != 2 || st.Denied != 0 || st.Refunded != 1 {
		t.Errorf("Stats = %+v, want 2 allowed (the reservation too), 0 denied, 1 refunded", st)
	}
	// The slot came back: the bucket has the same debt as before Wait.
	if d := l.AllowN("k", 0); d.ResetAfter != time.Hour {
		t.Errorf("after the refund ResetAfter = %v, want 1h", d.ResetAfter)
	}
}
