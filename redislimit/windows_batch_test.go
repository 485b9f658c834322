package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestWindowsBatchDifferential: batches (batch.lua, on KEYS and inline as
// on a Cluster's node) of up to 10 decisions at one instant, each of 1 to
// 3 layers of fixed windows in and out of the packed range (a Limit of
// 2^20-1 and 2^20, a window of 250 ms whose index passes 2^32), with a
// token bucket in seeds 5 to 7 (the general path), on two keys that the
// decisions of a batch share, costs -1 to 3, Limit-1, Limit, Limit+1 and
// 2^62, some keys rewritten to the string layout an earlier version wrote
// with the same meaning; seeds 8 to 11 set the clock back too (one layer:
// see the package doc, The server's clock). Every decision equals
// hotlimit's AllowLayersState on a ManualClock, decided in the batch's
// order (Decision, binding layer, each layer's Remaining and next unit),
// and after each batch every key has a TTL, none longer than its state
// can still count.
func TestWindowsBatchDifferential(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	for _, inline := range []bool{false, true} {
		for seed := range 12 {
			t.Run(fmt.Sprintf("inline=%v/%d", inline, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(seed), 11))
				clock := hotlimit.NewManualClock()
				clock.Set(baseMicros * time.Microsecond)
				prefix := redistest.Prefix(t)
				ps := []pair{
					newPair(t, c, clock, "f3", prefix, hotlimit.FixedWindow{Limit: 3, Window: time.Second}),
					newPair(t, c, clock, "fmax", prefix, hotlimit.FixedWindow{Limit: 1<<20 - 1, Window: 2 * time.Second}),
					newPair(t, c, clock, "fbig", prefix, hotlimit.FixedWindow{Limit: 1 << 20, Window: time.Second}),
					newPair(t, c, clock, "fshort", prefix, hotlimit.FixedWindow{Limit: 4, Window: 250 * time.Millisecond}),
					newPair(t, c, clock, "f1", prefix, hotlimit.FixedWindow{Limit: 1, Window: 700 * time.Millisecond}),
				}
				if seed >= 5 {
					ps = append(ps, newPair(t, c, clock, "tb", prefix, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(5), Burst: 3}))
				}
				b := routerFor(c).batch
				if inline {
					b = &batcher{r: routerFor(c), node: routerFor(c).addr, cluster: true, turns: 1}
				}
				keys := []string{"a", "b"}
				hw, lo := int64(0), int64(baseMicros) // the latest and the earliest instant decided at
				for round := range 60 {
					back := seed >= 8
					if back && rng.IntN(5) == 0 {
						clock.Advance(-time.Duration(rng.Int64N(1_500_000)) * time.Microsecond)
					} else {
						clock.Advance(time.Duration(rng.Int64N(400_000)) * time.Microsecond)
					}
					now := int64(clock.Now() / time.Microsecond)
					hw, lo = max(hw, now), min(lo, now)
					// An earlier version's layout of the same state.
					if rng.IntN(4) == 0 {
						p := ps[rng.IntN(2)]
						rk := p.remote.RedisKey(keys[rng.IntN(2)])
						if v, err := c.Get(ctx, rk).Result(); err == nil {
							if k, _, q, ok := windowState(v); ok {
								c.Do(ctx, "SET", rk, fmt.Sprintf("%d 0 %d", k, q), "KEEPTTL")
							}
						}
					}
					m := 1 + rng.IntN(10)
					var calls []*batchCall
					var layerss [][]Layer
					var wants []hotlimit.Decision
					var wantIdx []int
					var wantStates [][]hotlimit.LayerState
					for range m {
						n := 1 + rng.IntN(3)
						if back {
							n = 1 // see the package doc, The server's clock: a denial's give-backs differ then
						}
						var local []hotlimit.Layer
						var remote []Layer
						seen := map[string]bool{}
						for range n {
							p := ps[rng.IntN(len(ps))]
							key := keys[rng.IntN(len(keys))]
							if seen[p.remote.RedisKey(key)] {
								continue // the Go side groups a limiter and key that repeat
							}
							seen[p.remote.RedisKey(key)] = true
							lim := p.remote.spec.limit
							cost := rng.Int64N(4)
							switch rng.IntN(12) {
							case 0:
								cost = -1
							case 1:
								cost = lim
							case 2:
								cost = lim + 1
							case 3:
								cost = 1 << 62
							case 4:
								cost = lim - 1
							}
							local = append(local, hotlimit.Layer{Limiter: p.local, Key: key, Cost: cost})
							remote = append(remote, Layer{Limiter: p.remote, Key: key, Cost: cost})
						}
						n = len(local)
						next := rng.IntN(2) == 0
						each := make([]hotlimit.LayerState, n)
						w, wi := hotlimit.AllowLayersState(each, local...)
						var ws []hotlimit.LayerState
						if next {
							for j := range n {
								ws = append(ws, wantState(local, j, each[j].Decision))
							}
						}
						wants, wantIdx, wantStates = append(wants, w), append(wantIdx, wi), append(wantStates, ws)
						bc := batchCallOf(remote, next)
						bc.client, bc.deadline = c, time.Now().Add(10*time.Second)
						calls = append(calls, bc)
						layerss = append(layerss, remote)
					}
					b.sendMany(calls, strconv.FormatInt(now, 10))
					// Every key expires, and not later than its state can
					// still count (a window, a set-back, the test's hour).
					for _, p := range ps {
						for _, key := range keys {
							ttl := c.PTTL(ctx, p.remote.RedisKey(key)).Val()
							if ttl == -1 || ttl > time.Hour+2*time.Second+time.Millisecond+time.Duration(hw-lo)*time.Microsecond {
								t.Fatalf("round %d: key %s/%s TTL %v (state %q) now %d hw %d", round, p.remote.name, key, ttl, c.Get(ctx, p.remote.RedisKey(key)).Val(), now, hw)
							}
						}
					}
					for i, bc := range calls {
						if bc.err != nil {
							t.Fatalf("round %d call %d: %v", round, i, bc.err)
						}
						r := replyOf(bc, layerss[i])
						var states []hotlimit.LayerState
						if bc.next {
							states = make([]hotlimit.LayerState, len(layerss[i]))
						}
						got, _, gi, err := decode(r, layerss[i], states)
						if err != nil {
							t.Fatal(err)
						}
						if !sameDecision(wants[i], got) || gi != wantIdx[i] {
							t.Fatalf("round %d, call %d of %d, layers %v at %d:\n local %+v binding %d\n redis %+v binding %d (reply %v)", round, i, m, describe(layerss[i]), now, wants[i], wantIdx[i], got, gi, r)
						}
						for j := range states {
							w := wantStates[i][j]
							if states[j].Decision.Remaining != w.Decision.Remaining || w.Next >= 0 && states[j].Next != w.Next {
								t.Fatalf("round %d, call %d, layers %v, layer %d state: local %+v redis %+v", round, i, describe(layerss[i]), j, w, states[j])
							}
						}
					}
				}
			})
		}
	}
}
