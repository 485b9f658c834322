package linearize

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/hotlimit/hotlimit"
)

// ConcConfig describes one history of a ConcurrencyLimiter.
type ConcConfig struct {
	Limit   int64
	Keys    int
	Workers int
	Ops     int // operations per goroutine
	Seed    uint64
}

type concOp uint8

const (
	opTryAcquire concOp = iota // TryAcquireN: ok compared
	opAcquire                  // AcquireN with a context that ends soon: ok compared (a failure is always possible)
	opRelease                  // Permit.Release: first compared
	opInFlight                 // InFlight: the count compared
	opConcSweep                // Sweep: the count compared
)

var concOpNames = [...]string{"TryAcquire", "Acquire", "Release", "InFlight", "Sweep"}

type concIn struct {
	op     concOp
	key    string
	n      int64
	permit int // opRelease: which permit (its acquisition's id)
	id     int // opTryAcquire, opAcquire: this acquisition's id
}

type concOut struct {
	ok bool
	n  int64
}

// concState is the model: slots held per key, the keys the limiter holds
// (held or idle and not yet swept), and the permits not yet released.
type concState struct {
	held    map[string]int64
	present map[string]bool
	permits map[int]bool
	desc    string
}

func (s *concState) String() string {
	if s.desc == "" {
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(s.present)) {
			fmt.Fprintf(&b, "%s:%d ", k, s.held[k])
		}
		for _, p := range slices.Sorted(maps.Keys(s.permits)) {
			fmt.Fprintf(&b, "p%d ", p)
		}
		s.desc = b.String()
	}
	return s.desc
}

func concModel(cfg ConcConfig) porcupine.Model {
	return porcupine.Model{
		Init: func() any {
			return &concState{held: map[string]int64{}, present: map[string]bool{}, permits: map[int]bool{}}
		},
		Step: func(state, input, output any) (bool, any) {
			o, in, out := state.(*concState), input.(concIn), output.(concOut)
			s := &concState{held: maps.Clone(o.held), present: maps.Clone(o.present), permits: maps.Clone(o.permits)}
			switch in.op {
			case opTryAcquire, opAcquire:
				fits := in.n >= 1 && in.n <= cfg.Limit && s.held[in.key]+in.n <= cfg.Limit
				if out.ok {
					if !fits {
						return false, s
					}
					s.held[in.key] += in.n
					s.present[in.key] = true
					s.permits[in.id] = true
					return true, s
				}
				// AcquireN may fail however the slots stand (its context
				// ended); TryAcquireN only when they are full.
				return in.op == opAcquire || !fits, s
			case opRelease:
				first := s.permits[in.permit]
				if out.ok != first {
					return false, s
				}
				if first {
					delete(s.permits, in.permit)
					s.held[in.key] = max(0, s.held[in.key]-in.n)
				}
				return true, s
			case opInFlight:
				return s.held[in.key] == out.n, s
			case opConcSweep:
				n := 0
				for k := range s.present {
					if s.held[k] == 0 {
						delete(s.present, k)
						delete(s.held, k)
						n++
					}
				}
				return int64(n) == out.n, s
			}
			return false, s
		},
		Equal: func(a, b any) bool { return a.(*concState).String() == b.(*concState).String() },
		Hash: func(state any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(state.(*concState).String()))
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(concIn), output.(concOut)
			return fmt.Sprintf("%s %s n %d (permit %d/%d) → %v %d", concOpNames[in.op], in.key, in.n, in.id, in.permit, out.ok, out.n)
		},
		DescribeState: func(state any) string { return state.(*concState).String() },
	}
}

// newConcLimiter returns the ConcurrencyLimiter a history of cfg runs on.
//
// One shard: a Sweep removes idle keys shard by shard, each under that
// shard's mutex, so with keys in two shards it is not one step. A release
// in the first shard and an acquisition in the second, made while the
// sweep is between the two, give it a count no single instant has (see
// TestConcSweepOneStep). With one shard and fewer keys than a sweep
// examines per lock hold, a Sweep is one step, as the model makes it.
func newConcLimiter(cfg ConcConfig, opts ...hotlimit.Option) (*hotlimit.ConcurrencyLimiter, error) {
	return hotlimit.NewConcurrency(cfg.Limit, append([]hotlimit.Option{hotlimit.WithShards(1), hotlimit.WithSweepInterval(0)}, opts...)...)
}

// RunConc runs one history of cfg and returns it.
func RunConc(cfg ConcConfig) ([]porcupine.Operation, error) {
	c, err := newConcLimiter(cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var (
		tick   atomic.Int64
		mu     sync.Mutex
		hist   []porcupine.Operation
		nextID atomic.Int64
		wg     sync.WaitGroup
	)
	record := func(client int, in concIn, f func() concOut) {
		call := tick.Add(1)
		out := f()
		ret := tick.Add(1)
		mu.Lock()
		hist = append(hist, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
		mu.Unlock()
	}
	start := make(chan struct{}) // every worker starts at once
	for g := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(cfg.Seed, uint64(g)))
			<-start
			type held struct {
				p  hotlimit.Permit
				id int
				in concIn
			}
			var mine []held
			for range cfg.Ops {
				if r.IntN(4) == 0 {
					runtime.Gosched() // vary the interleaving
				}
				key := fmt.Sprint("k", r.IntN(cfg.Keys))
				switch x := r.IntN(10); {
				case x < 3 || x < 5 && len(mine) == 0:
					in := concIn{op: opTryAcquire, key: key, n: r.Int64N(cfg.Limit+1) + 1 - r.Int64N(2), id: int(nextID.Add(1))}
					if x == 0 {
						in.op = opAcquire
					}
					record(g, in, func() concOut {
						var p hotlimit.Permit
						var ok bool
						if in.op == opAcquire {
							// Short enough to keep histories quick; a waiter
							// that times out is a legal failure.
							ctx, cancel := context.WithTimeout(context.Background(), 200*time.Microsecond)
							var err error
							p, err = c.AcquireN(ctx, key, in.n)
							cancel()
							ok = err == nil
						} else {
							p, ok = c.TryAcquireN(key, in.n)
						}
						if ok {
							mine = append(mine, held{p, in.id, in})
						}
						return concOut{ok: ok}
					})
				case x < 8 && len(mine) > 0:
					j := r.IntN(len(mine))
					h := mine[j]
					if r.IntN(4) != 0 { // now and then a second release of the same permit
						mine = slices.Delete(mine, j, j+1)
					}
					in := concIn{op: opRelease, key: h.in.key, n: h.in.n, permit: h.id}
					record(g, in, func() concOut { return concOut{ok: h.p.Release()} })
				case x < 9:
					record(g, concIn{op: opInFlight, key: key}, func() concOut { return concOut{n: c.InFlight(key)} })
				default:
					record(g, concIn{op: opConcSweep}, func() concOut { return concOut{n: int64(c.Sweep())} })
				}
			}
			for _, h := range mine {
				in := concIn{op: opRelease, key: h.in.key, n: h.in.n, permit: h.id}
				record(g, in, func() concOut { return concOut{ok: h.p.Release()} })
			}
		}()
	}
	close(start)
	wg.Wait()
	return hist, nil
}

// CheckConc runs a history of cfg and checks it against the model.
func CheckConc(cfg ConcConfig, timeout time.Duration) (int, porcupine.CheckResult, porcupine.LinearizationInfo, error) {
	hist, err := RunConc(cfg)
	if err != nil {
		return 0, porcupine.Unknown, porcupine.LinearizationInfo{}, err
	}
	res, info := porcupine.CheckOperationsVerbose(concModel(cfg), hist, timeout)
	return len(hist), res, info, nil
}
