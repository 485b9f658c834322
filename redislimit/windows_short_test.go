package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestBatchShortReplyDifferential: batches of 1 to 8 decisions of 1 to 3
// layers, on one server and as a Cluster's node sends them (keys inline),
// each against the same decision alone (script.lua, the full reply) on a
// copy of the same states at the same instant. Every key starts in one of
// the states a key can hold (absent; a count in the window below, at or
// over the Limit; an earlier window; a stale one, a window ahead; counts
// carried over from a shorter Window; the string layout, current or
// stale; a bucket's TAT; a string of no number; a hash; no TTL), each call
// has a cost from -1 to Limit+1 and asks for the next unit or not, over
// fixed windows in and out of the packed range and a token bucket. The
// replies (a short one expanded as run expands it) and the states after
// must be the same: the short reply says what the full one says, and an
// error or a fallback in mid-batch shifts no other decision's reply.
func TestBatchShortReplyDifferential(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	type limit struct {
		name   string
		limit  int64
		window time.Duration // 0: a token bucket of Burst limit
	}
	limits := []limit{
		{"a", 3, time.Second}, {"s", 5, time.Minute}, {"o", 1, 700 * time.Millisecond},
		{"big", 1 << 20, time.Second}, {"max", 1<<20 - 1, 3 * time.Second},
		{"short", 4, 250 * time.Millisecond}, // a window index past the packed range
		{"huge", 7, 10000 * time.Hour}, {"tb", 3, 0},
	}
	states := []string{"absent", "q0", "q1", "q=limit-1", "q=limit", "q=limit+2", "earlier", "stale", "stale full",
		"carried", "carried over", "string", "string stale", "tat", "garbage", "hash", "no ttl"}
	var short, full, failed int
	for _, inline := range []bool{false, true} {
		for seed := range 150 {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			now := int64(baseMicros) + rng.Int64N(5_000_000)
			mk := func(prefix string) []*Limiter {
				var ls []*Limiter
				for _, lm := range limits {
					var p hotlimit.Policy = hotlimit.FixedWindow{Limit: lm.limit, Window: lm.window}
					if lm.window == 0 {
						p = hotlimit.TokenBucket{Rate: hotlimit.PerSecond(5), Burst: lm.limit}
					}
					l := must(New(c, lm.name, p, WithPrefix(prefix)))
					l.testNow = func() int64 { return now }
					ls = append(ls, l)
				}
				return ls
			}
			batched, alone := mk(redistest.Prefix(t)), mk(redistest.Prefix(t))
			b := routerFor(c).batch
			if inline {
				b = &batcher{r: routerFor(c), node: routerFor(c).addr, cluster: true, turns: 1}
			}
			for li, lm := range limits {
				w := lm.window.Microseconds()
				if w == 0 {
					w = 200_000
				}
				k, e := now/w, now%w
				packed := func(k, q int64) string { return packedState(k, q) }
				ttl := time.Duration(w-e)*time.Microsecond + time.Hour
				for ki := range 4 {
					st := states[rng.IntN(len(states))]
					for _, side := range [][]*Limiter{batched, alone} {
						key := side[li].RedisKey("k" + strconv.Itoa(ki))
						var err error
						switch st {
						case "q0":
							err = c.Set(ctx, key, packed(k, 0), ttl).Err()
						case "q1":
							err = c.Set(ctx, key, packed(k, 1), ttl).Err()
						case "q=limit-1":
							err = c.Set(ctx, key, packed(k, lm.limit-1), ttl).Err()
						case "q=limit":
							err = c.Set(ctx, key, packed(k, lm.limit), ttl).Err()
						case "q=limit+2": // a Limit lowered under the same name
							err = c.Set(ctx, key, packed(k, min(lm.limit+2, 1<<21-1)), ttl).Err()
						case "earlier":
							err = c.Set(ctx, key, packed(k-1, 2), ttl).Err()
						case "stale": // the server's clock set back a window
							err = c.Set(ctx, key, packed(k+1, 1), ttl+lm.window).Err()
						case "stale full":
							err = c.Set(ctx, key, packed(k+1, lm.limit), ttl+lm.window).Err()
						case "carried": // counted in a shorter Window: its index far ahead
							err = c.Set(ctx, key, packed(4*k, 1), time.Hour).Err()
						case "carried over":
							err = c.Set(ctx, key, packed(4*k, lm.limit+1), time.Hour).Err()
						case "string":
							err = c.Set(ctx, key, fmt.Sprintf("%d 0 %d", k, min(2, lm.limit)), ttl).Err()
						case "string stale":
							err = c.Set(ctx, key, fmt.Sprintf("%d 0 %d", k+1, 1), ttl+lm.window).Err()
						case "tat":
							err = c.Set(ctx, key, strconv.FormatInt(now+5, 10), ttl).Err()
						case "garbage":
							err = c.Set(ctx, key, "hello", ttl).Err()
						case "hash":
							err = c.HSet(ctx, key, "f", "v").Err()
						case "no ttl":
							err = c.Set(ctx, key, packed(k, 1), 0).Err()
						}
						if err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			var calls []*batchCall
			var layerss [][]Layer
			var want [][]int64
			var wantErr []error
			for range 1 + rng.IntN(8) {
				var ls, la []Layer
				var akeys []string
				seen := map[string]bool{}
				for range 1 + rng.IntN(3) {
					li, key := rng.IntN(len(limits)), "k"+strconv.Itoa(rng.IntN(4))
					if seen[batched[li].RedisKey(key)] {
						continue
					}
					seen[batched[li].RedisKey(key)] = true
					lim := limits[li].limit
					cost := []int64{-1, 0, 1, 2, lim, lim + 1}[rng.IntN(6)]
					ls, la = append(ls, Layer{batched[li], key, cost}), append(la, Layer{alone[li], key, cost})
					akeys = append(akeys, alone[li].RedisKey(key))
				}
				next := rng.IntN(2) == 0
				w, err := run(ctx, time.Now().Add(5*time.Second), c, routerFor(c).addr, la, akeys, next, "", nil)
				want, wantErr = append(want, w), append(wantErr, err)
				bc := batchCallOf(ls, next)
				bc.client = c
				calls, layerss = append(calls, bc), append(layerss, ls)
			}
			b.sendMany(calls, strconv.FormatInt(now, 10))
			for i, bc := range calls {
				where := fmt.Sprintf("inline %v, seed %d, call %d of %d (%v)", inline, seed, i, len(calls), describe(layerss[i]))
				if (bc.err != nil) != (wantErr[i] != nil) {
					t.Fatalf("%s: batched error %v, alone %v", where, bc.err, wantErr[i])
				}
				switch {
				case bc.err != nil:
					failed++
					continue
				case bc.short:
					short++
				default:
					full++
				}
				if got := replyOf(bc, layerss[i]); !slices.Equal(got, want[i]) {
					t.Fatalf("%s, short %v: batched %v, alone %v", where, bc.short, got, want[i])
				}
			}
			for li := range limits {
				for ki := range 4 {
					kb, ka := batched[li].RedisKey("k"+strconv.Itoa(ki)), alone[li].RedisKey("k"+strconv.Itoa(ki))
					if vb, va := c.Get(ctx, kb).Val(), c.Get(ctx, ka).Val(); vb != va {
						t.Fatalf("inline %v, seed %d: key %s holds %q batched, %q alone", inline, seed, kb, vb, va)
					}
				}
			}
		}
	}
	// Each kind of reply was compared, many times.
	if short < 40 || full < 40 || failed < 40 {
		t.Fatalf("short replies %d, full %d, failed decisions %d: want at least 40 of each", short, full, failed)
	}
	t.Logf("short replies %d, full %d, failed decisions %d", short, full, failed)
}
