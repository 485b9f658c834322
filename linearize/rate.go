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
	"github.com/hotlimit/hotlimit/internal/refmodel"
)

// RateConfig describes one history of a rate limiter ("A") and a second
// limiter ("B") that AllowLayers uses as its second layer.
type RateConfig struct {
	Policies []hotlimit.Policy // A's policy at New, then the ones SetPolicy picks from (one algorithm)
	Gate     hotlimit.Policy   // B's policy
	Keys     int               // A's keys k0, k1, ...
	Workers  int               // goroutines
	Ops      int               // operations per goroutine
	Seed     uint64            // the generator's seed
	Step     time.Duration     // how far the shared instant moves at most per move
	Options  []hotlimit.Option // more options for A (WithShards(1) and no sweeper are set)
}

type rateOp uint8

const (
	opAllowN      rateOp = iota // A.AllowN: the whole Decision is compared
	opRefund                    // A.Refund
	opSetPolicy                 // A.SetPolicy(Policies[arg])
	opWait                      // A.Wait without a deadline (buckets)
	opSweep                     // A.Sweep: the count is compared
	opLayerAllow                // one layer's admission step of AllowLayers: Allowed is compared
	opLayerRefund               // AllowLayers giving back layer A's admission
)

var rateOpNames = [...]string{"AllowN", "Refund", "SetPolicy", "Wait", "Sweep", "LayerAllow", "LayerRefund"}

// rateIn is an operation's input: what it did, on which limiter (0 is A,
// 1 is B), and the instant it read.
type rateIn struct {
	op   rateOp
	lim  int
	key  string
	cost int64
	arg  int   // opSetPolicy: policy index; opLayer*: the AllowLayers call's id
	at   int64 // the instant the operation read
	back bool  // opLayerAllow on A: a later step gives it back
}

// rateOut is an operation's output.
type rateOut struct {
	d       hotlimit.Decision // opAllowN
	allowed bool              // opLayerAllow, opWait
	n       int               // opSweep
}

// rateState is the models' state: A's, B's, and the instants at which
// layered admissions on A that are given back later were made.
type rateState struct {
	a, b    *refmodel.Model
	pending map[int]int64
	desc    string // canonical description, computed once
}

func (s *rateState) String() string {
	if s.desc == "" {
		var b strings.Builder
		b.WriteString(s.a.String())
		b.WriteString(" | ")
		b.WriteString(s.b.String())
		for _, k := range slices.Sorted(maps.Keys(s.pending)) {
			fmt.Fprintf(&b, " pending%d@%d", k, s.pending[k])
		}
		s.desc = b.String()
	}
	return s.desc
}

// rateModel is the porcupine model of a RateConfig's limiters: refmodel's
// sequential reference, each step on the instant the operation read.
func rateModel(cfg RateConfig) porcupine.Model {
	clone := func(s *rateState) *rateState {
		return &rateState{
			a:       s.a.Clone(hotlimit.NewManualClock()),
			b:       s.b.Clone(hotlimit.NewManualClock()),
			pending: maps.Clone(s.pending),
		}
	}
	return porcupine.Model{
		Init: func() any {
			return &rateState{
				a:       refmodel.New(cfg.Policies[0], hotlimit.NewManualClock()),
				b:       refmodel.New(cfg.Gate, hotlimit.NewManualClock()),
				pending: map[int]int64{},
			}
		},
		Step: func(state, input, output any) (bool, any) {
			s, in, out := clone(state.(*rateState)), input.(rateIn), output.(rateOut)
			clk := hotlimit.NewManualClock()
			clk.Set(time.Duration(in.at))
			m := s.a
			if in.lim == 1 {
				m = s.b
			}
			m = m.Clone(clk) // reads in.at
			if in.lim == 1 {
				s.b = m
			} else {
				s.a = m
			}
			ok := true
			switch in.op {
			case opAllowN:
				ok = m.AllowN(in.key, in.cost) == out.d
			case opRefund:
				m.Refund(in.key, in.cost)
			case opSetPolicy:
				m.SetPolicy(cfg.Policies[in.arg])
			case opWait:
				ok = m.Reserve(in.key, in.cost) == out.allowed
			case opSweep:
				ok = m.Sweep() == out.n
			case opLayerAllow:
				d, at := m.AllowNAt(in.key, in.cost)
				ok = d.Allowed == out.allowed
				if ok && d.Allowed && in.back {
					s.pending[in.arg] = at
				}
			case opLayerRefund:
				at, held := s.pending[in.arg]
				if !held {
					return false, s
				}
				delete(s.pending, in.arg)
				m.RefundAt(in.key, in.cost, at)
			}
			return ok, s
		},
		Equal: func(a, b any) bool { return a.(*rateState).String() == b.(*rateState).String() },
		Hash: func(state any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(state.(*rateState).String()))
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(rateIn), output.(rateOut)
			s := fmt.Sprintf("%s lim%d %s cost %d @%d", rateOpNames[in.op], in.lim, in.key, in.cost, in.at)
			switch in.op {
			case opAllowN:
				s += fmt.Sprintf(" → %+v", out.d)
			case opLayerAllow, opWait:
				s += fmt.Sprintf(" → %v", out.allowed)
			case opSweep:
				s += fmt.Sprintf(" → %d", out.n)
			case opSetPolicy:
				s += fmt.Sprintf(" %+v", cfg.Policies[in.arg])
			}
			return s
		},
		DescribeState: func(state any) string { return state.(*rateState).String() },
	}
}

// RunRate runs one history of cfg and returns it.
func RunRate(cfg RateConfig) ([]porcupine.Operation, error) {
	rec := NewRecorder()
	a, err := hotlimit.New(cfg.Policies[0], append([]hotlimit.Option{hotlimit.WithClock(rec.Clock(0)), hotlimit.WithShards(1), hotlimit.WithSweepInterval(0)}, cfg.Options...)...)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	b, err := hotlimit.New(cfg.Gate, hotlimit.WithClock(rec.Clock(1)), hotlimit.WithShards(1), hotlimit.WithSweepInterval(0))
	if err != nil {
		return nil, err
	}
	defer b.Close()
	minLimit := a.Limit()
	for _, p := range cfg.Policies {
		l, err := hotlimit.New(p)
		if err != nil {
			return nil, err
		}
		minLimit = min(minLimit, l.Limit())
		l.Close()
	}
	bucket := false
	switch cfg.Policies[0].(type) {
	case hotlimit.TokenBucket, hotlimit.LeakyBucket:
		bucket = true
	}

	var (
		base   atomic.Int64 // the shared instant
		mu     sync.Mutex
		hist   []porcupine.Operation
		nextID atomic.Int64
		errs   = make(chan error, cfg.Workers)
		wg     sync.WaitGroup
	)
	base.Store(int64(time.Millisecond))
	add := func(client int, in rateIn, out rateOut, call, ret int64) {
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
			for range cfg.Ops {
				if r.IntN(4) == 0 {
					runtime.Gosched() // vary the interleaving
				}
				// The shared instant moves forward now and then; an operation
				// reads it, or now and then an older one.
				if r.IntN(6) == 0 {
					base.Add(r.Int64N(int64(cfg.Step) + 1))
				}
				at := base.Load()
				if r.IntN(3) == 0 {
					at = max(0, at-r.Int64N(2*int64(cfg.Step)+1))
				}
				key := fmt.Sprint("k", r.IntN(cfg.Keys))
				in := rateIn{lim: 0, key: key, at: at}
				var out rateOut
				switch x := r.IntN(20); {
				case x < 8:
					in.op, in.cost = opAllowN, r.Int64N(minLimit+3)-1 // −1 … Limit+1
					call, ret, _ := rec.do(at, func() { out.d = a.AllowN(key, in.cost) })
					add(g, in, out, call, ret)
				case x < 10:
					in.op, in.cost = opRefund, 1+r.Int64N(minLimit)
					call, ret, _ := rec.do(at, func() { a.Refund(key, in.cost) })
					add(g, in, out, call, ret)
				case x < 12:
					in.op, in.arg = opSetPolicy, r.IntN(len(cfg.Policies))
					var err error
					call, ret, _ := rec.do(at, func() { err = a.SetPolicy(cfg.Policies[in.arg]) })
					if err != nil {
						errs <- err
						return
					}
					add(g, in, out, call, ret)
				case x < 13 && bucket:
					in.op, in.cost = opWait, 1+r.Int64N(minLimit)
					call, ret, _ := rec.do(at, func() { out.allowed = a.Wait(context.Background(), key, in.cost) == nil })
					add(g, in, out, call, ret)
				case x < 14:
					in.op = opSweep
					call, ret, _ := rec.do(at, func() { out.n = a.Sweep() })
					add(g, in, out, call, ret)
				default:
					id := int(nextID.Add(1))
					cost := 1 + r.Int64N(minLimit)
					var d hotlimit.Decision
					_, ret, reads := rec.do(at, func() {
						d = hotlimit.AllowLayers(hotlimit.Layer{Limiter: a, Key: key, Cost: cost}, hotlimit.Layer{Limiter: b, Key: "g", Cost: 1})
					})
					ops, err := splitLayers(id, key, cost, at, d.Allowed, ret, reads)
					if err != nil {
						errs <- err
						return
					}
					for _, op := range ops {
						op.ClientId = g
						mu.Lock()
						hist = append(hist, op)
						mu.Unlock()
					}
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return hist, nil
}

// splitLayers cuts AllowLayers(A key cost, B "g" 1) into the steps it
// takes, each between two of its clock reads (each layer's step reads the
// clock first): A's admission step, B's, and A's give-back when B refused.
// The checks that build a denied Decision read the clock too and change
// nothing; they are left out. The reads tell the cases apart:
//
//	allowed:             A B       → A admits, B admits
//	denied, A refused:   A B       → A refuses (B only checked)
//	denied, B refused:   A B A A   → A admits, B refuses, A gives back (A checked)
func splitLayers(id int, key string, cost, at int64, allowed bool, ret int64, reads []clockRead) ([]porcupine.Operation, error) {
	lims := make([]int, len(reads))
	for i, r := range reads {
		lims[i] = r.lim
	}
	step := func(lim int, k string, c int64, ok, back bool, from, to int64) porcupine.Operation {
		return porcupine.Operation{
			Input:  rateIn{op: opLayerAllow, lim: lim, key: k, cost: c, arg: id, at: at, back: back},
			Output: rateOut{allowed: ok},
			Call:   from, Return: to,
		}
	}
	switch {
	case allowed && slices.Equal(lims, []int{0, 1}):
		return []porcupine.Operation{
			step(0, key, cost, true, false, reads[0].tick, reads[1].tick),
			step(1, "g", 1, true, false, reads[1].tick, ret),
		}, nil
	case !allowed && slices.Equal(lims, []int{0, 1}):
		return []porcupine.Operation{step(0, key, cost, false, false, reads[0].tick, reads[1].tick)}, nil
	case !allowed && slices.Equal(lims, []int{0, 1, 0, 0}):
		return []porcupine.Operation{
			step(0, key, cost, true, true, reads[0].tick, reads[1].tick),
			step(1, "g", 1, false, false, reads[1].tick, reads[2].tick),
			{
				Input:  rateIn{op: opLayerRefund, lim: 0, key: key, cost: cost, arg: id, at: at},
				Output: rateOut{},
				Call:   reads[2].tick, Return: reads[3].tick,
			},
		}, nil
	}
	return nil, fmt.Errorf("linearize: AllowLayers (allowed %v) read the clocks of limiters %v: not a sequence this harness knows", allowed, lims)
}

// CheckRate runs a history of cfg and checks it against the reference
// model, giving up after timeout (porcupine's search is exponential in the
// worst case). It returns the history's length and the verdict.
func CheckRate(cfg RateConfig, timeout time.Duration) (int, porcupine.CheckResult, porcupine.LinearizationInfo, error) {
	hist, err := RunRate(cfg)
	if err != nil {
		return 0, porcupine.Unknown, porcupine.LinearizationInfo{}, err
	}
	res, info := porcupine.CheckOperationsVerbose(rateModel(cfg), hist, timeout)
	return len(hist), res, info, nil
}

// Model returns the porcupine model CheckRate uses, for a visualization of
// a failed history (porcupine.VisualizePath).
func Model(cfg RateConfig) porcupine.Model { return rateModel(cfg) }
