package linearize

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
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
	"github.com/hotlimit/hotlimit/internal/testhook"
)

// RateConfig describes one history of a rate limiter ("A") and a second
// limiter ("B") that AllowLayers uses as its last layer.
type RateConfig struct {
	Policies []hotlimit.Policy // A's policy at New, then the ones SetPolicy picks from (one algorithm)
	Gate     hotlimit.Policy   // B's policy
	Keys     int               // A's keys k0, k1, ...
	Workers  int               // goroutines
	Ops      int               // operations per goroutine
	Seed     uint64            // the generator's seed
	Step     time.Duration     // how far the shared instant moves at most per move
	Options  []hotlimit.Option // more options for A (WithShards(1) and no sweeper are set)
	// MaxKeys, if 1, gives A WithMaxKeys(1), and goroutine 0 now and then
	// admits a key no other operation names ("e0", "e1", …), which evicts
	// whatever A holds. Under WithMaxKeys(1) every eviction's victim is the
	// one other entry, so the model can evict as the limiter does: an
	// operation that inserts a key into a full A first evicts the key held
	// (an opEvict step), and then decides (see evictSplit).
	MaxKeys int
}

type rateOp uint8

const (
	opAllowN      rateOp = iota // A.AllowN: the whole Decision is compared
	opAdmitN                    // A.AdmitN: the whole Decision is compared; a later opGiveBack may be its Refund
	opSetPolicy                 // A.SetPolicy(Policies[arg])
	opWait                      // A.Wait, admitted or refused at once (buckets): compared
	opSweep                     // A.Sweep: the count is compared
	opReset                     // A.Reset
	opLayerAllow                // one layer's admission step of AllowLayers: Allowed is compared
	opWaitReserve               // the reservation of a Wait that is given back later (buckets)
	opGiveBack                  // AllowLayers, a cancelled Wait or an Admission's Refund giving back admission arg on A
	opNoLayers                  // AllowLayers with no layers: refused with Never
	opEvict                     // an insertion of key into a full A evicting the key A holds (arg: the insertion's id)
)

var rateOpNames = [...]string{"AllowN", "AdmitN", "SetPolicy", "Wait", "Sweep", "Reset", "LayerAllow", "WaitReserve", "GiveBack", "NoLayers", "Evict"}

// rateIn is an operation's input: what it did, on which limiter (0 is A,
// 1 is B), and the instant it read.
type rateIn struct {
	op      rateOp
	lim     int
	key     string
	cost    int64
	arg     int   // opSetPolicy: policy index; opAdmitN, opLayerAllow, opWaitReserve, opGiveBack: the admission's id
	at      int64 // the instant the operation read
	maxWait int64 // opWait: the most it may wait (negative: its deadline has passed)
	back    bool  // opAdmitN, opLayerAllow on A, opWaitReserve: a later opGiveBack gives it back
	whole   bool  // opLayerAllow: the layer's whole Decision is compared, not only Allowed
	evicted bool  // the decision of an insertion whose opEvict step (same arg) came first
}

// rateOut is an operation's output.
type rateOut struct {
	d       hotlimit.Decision // opAllowN, opAdmitN, opLayerAllow (when whole), opNoLayers
	allowed bool              // opLayerAllow, opWait, opWaitReserve
	n       int               // opSweep
}

// pending is an admission on A that a later step gives back: what the
// give-back needs (rateIn.arg names it), and whether the entry it was made
// on is still the key's. Once the model no longer holds the key (swept,
// reset, left fresh by a refund), the admission went with the entry: the
// limiter gives nothing back to the entry that may replace it.
type pending struct {
	a    refmodel.Admission
	live bool
}

// rateState is the models' state: A's, B's, the admissions on A that
// later steps give back, and the insertion that evicted to make room and
// has not decided yet.
type rateState struct {
	a, b     *refmodel.Model
	pending  map[int]pending
	reserved int    // the id of the insertion holding A's one room after its eviction; 0: none
	desc     string // canonical description, computed once
}

func (s *rateState) String() string {
	if s.desc == "" {
		var b strings.Builder
		b.WriteString(s.a.String())
		b.WriteString(" | ")
		b.WriteString(s.b.String())
		if s.reserved != 0 {
			fmt.Fprintf(&b, " reserved:#%d", s.reserved)
		}
		for _, k := range slices.Sorted(maps.Keys(s.pending)) {
			p := s.pending[k]
			fmt.Fprintf(&b, " pending%d:%s/%d@%d-%d+%d,E%d,R%d/%v", k, p.a.Key, p.a.Cost, p.a.At, p.a.End, p.a.Span, p.a.Epoch, p.a.Ren, p.live)
		}
		s.desc = b.String()
	}
	return s.desc
}

// rateModel is the porcupine model of a RateConfig's limiters: refmodel's
// sequential reference, each step on the instant the operation read.
func rateModel(cfg RateConfig) porcupine.Model {
	return porcupine.Model{
		Init: func() any {
			return &rateState{
				a:       refmodel.New(cfg.Policies[0], hotlimit.NewManualClock()),
				b:       refmodel.New(cfg.Gate, hotlimit.NewManualClock()),
				pending: map[int]pending{},
			}
		},
		Step: func(state, input, output any) (bool, any) {
			s, in := state.(*rateState).clone(), input.(rateIn)
			m := s.at(in)
			if cfg.MaxKeys == 1 && !s.fits(in, m) {
				return false, s
			}
			ok := s.apply(cfg, in, output.(rateOut), m)
			if in.lim == 0 {
				s.dropGone()
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
			return describeRate(cfg, input.(rateIn), output.(rateOut))
		},
		DescribeState: func(state any) string { return state.(*rateState).String() },
	}
}

// clone returns a copy of s that a step may change.
func (s *rateState) clone() *rateState {
	return &rateState{
		a:        s.a.Clone(hotlimit.NewManualClock()),
		b:        s.b.Clone(hotlimit.NewManualClock()),
		pending:  maps.Clone(s.pending),
		reserved: s.reserved,
	}
}

// at replaces the model of the limiter step in is on (A or B) with one
// that reads in.at, and returns it.
func (s *rateState) at(in rateIn) *refmodel.Model {
	clk := hotlimit.NewManualClock()
	clk.Set(time.Duration(in.at))
	if in.lim == 1 {
		s.b = s.b.Clone(clk)
		return s.b
	}
	s.a = s.a.Clone(clk)
	return s.a
}

// fits reports whether in finds room in A under WithMaxKeys(1), and hands
// the room an eviction freed to the decision it was freed for. An
// insertion into a full A evicts (an opEvict step) and keeps the room
// freed until its decision: no other insertion fits in between.
func (s *rateState) fits(in rateIn, m *refmodel.Model) bool {
	switch {
	case in.lim != 0:
		return true
	case in.evicted:
		if s.reserved != in.arg {
			return false
		}
		s.reserved = 0
	case in.op != opEvict && inserts(in, m) && (s.reserved != 0 || len(m.Held()) > 0):
		return false // it would have had to evict, and did not
	}
	return true
}

// apply takes step in on m, the model of the limiter it names, and
// reports whether m gives the output out.
func (s *rateState) apply(cfg RateConfig, in rateIn, out rateOut, m *refmodel.Model) bool {
	switch in.op {
	case opEvict:
		return s.evict(in, m)
	case opGiveBack:
		return s.giveBack(in, m)
	case opSetPolicy:
		m.SetPolicy(cfg.Policies[in.arg])
		return true
	case opReset:
		m.Reset(in.key)
		return true
	case opSweep:
		return m.Sweep() == out.n
	case opNoLayers:
		return !out.d.Allowed && out.d.RetryAfter == hotlimit.Never
	}
	ok, adm, back := admit(in, out, m)
	if ok && back {
		s.pending[in.arg] = pending{adm, true}
	}
	return ok
}

// admit takes step in, one that may admit on m (AllowN, AdmitN, Wait, a
// layer's admission, a Wait's reservation), and reports whether m gives
// the output out, the admission it made, and whether a later step gives
// that admission back.
func admit(in rateIn, out rateOut, m *refmodel.Model) (ok bool, adm refmodel.Admission, back bool) {
	switch in.op {
	case opAllowN:
		return m.AllowN(in.key, in.cost) == out.d, adm, false
	case opAdmitN:
		d, adm := m.AdmitN(in.key, in.cost)
		return d == out.d, adm, in.back
	case opWait:
		admitted, _ := m.ReserveWithin(in.key, in.cost, in.maxWait)
		return admitted == out.allowed, adm, false
	case opLayerAllow:
		d, adm := m.AdmitN(in.key, in.cost)
		return d.Allowed == out.allowed && (!in.whole || d == out.d), adm, d.Allowed && in.back
	case opWaitReserve:
		admitted, adm := m.ReserveWithin(in.key, in.cost, math.MaxInt64)
		return admitted == out.allowed, adm, admitted && in.back
	}
	return false, adm, false // not a step that admits
}

// evict takes an opEvict step on m, A's model: it evicts the one entry A
// holds, not the inserter's key (an insertion finding its key in the
// sample uses it), judged at the inserter's reading, as reserveKey does,
// and reserves the room for the insertion.
func (s *rateState) evict(in rateIn, m *refmodel.Model) bool {
	held := m.Held()
	if s.reserved != 0 || len(held) != 1 || held[0] == in.key {
		return false
	}
	m.Evict(held[0])
	s.reserved = in.arg
	return true
}

// giveBack takes an opGiveBack step on m, A's model: the admission it
// names gives back what the state still owes it, nothing once its entry
// is gone, and only once.
func (s *rateState) giveBack(in rateIn, m *refmodel.Model) bool {
	p, held := s.pending[in.arg]
	if !held {
		return false
	}
	delete(s.pending, in.arg)
	if p.live {
		m.GiveBackAt(p.a)
	}
	return true
}

// dropGone marks the pending admissions whose entry A's model no longer
// holds: an admission whose entry is gone gives nothing back.
func (s *rateState) dropGone() {
	for id, p := range s.pending {
		if p.live && !s.a.Holds(p.a.Key) {
			p.live = false
			s.pending[id] = p
		}
	}
}

// describeRate describes step in and its output, for a visualization.
func describeRate(cfg RateConfig, in rateIn, out rateOut) string {
	s := fmt.Sprintf("%s lim%d %s cost %d @%d", rateOpNames[in.op], in.lim, in.key, in.cost, in.at)
	if in.evicted {
		s += fmt.Sprintf(" (after eviction #%d)", in.arg)
	}
	switch in.op {
	case opAllowN, opAdmitN, opNoLayers:
		s += fmt.Sprintf(" → %+v", out.d)
	case opLayerAllow, opWait, opWaitReserve:
		if in.op == opWait && in.maxWait < 0 {
			s += " (deadline passed)"
		}
		if in.back {
			s += fmt.Sprintf(" (given back: #%d)", in.arg)
		}
		s += fmt.Sprintf(" → %v", out.allowed)
		if in.whole {
			s += fmt.Sprintf(" %+v", out.d)
		}
	case opGiveBack, opEvict:
		s += fmt.Sprintf(" #%d", in.arg)
	case opSweep:
		s += fmt.Sprintf(" → %d", out.n)
	case opSetPolicy:
		s += fmt.Sprintf(" %+v", cfg.Policies[in.arg])
	}
	return s
}

// inserts reports whether operation in, on A, inserts its key into m: it
// names a key m does not hold, with a cost a new entry can admit (as
// lockSlotFirst inserts, evicting to make room, before the request's own
// decision, which may still refuse a Wait whose deadline has passed).
// Under WithMaxKeys(1), such an operation on a full A must have evicted.
func inserts(in rateIn, m *refmodel.Model) bool {
	switch in.op {
	case opAllowN, opAdmitN, opLayerAllow, opWait, opWaitReserve:
		return 1 <= in.cost && in.cost <= m.Limit() && !m.Holds(in.key)
	}
	return false
}

// deadlinePassed is a context whose deadline passes between Wait's checks:
// Err reports nothing, and the deadline is already behind.
type deadlinePassed struct{ context.Context }

func (deadlinePassed) Deadline() (time.Time, bool) { return time.Now().Add(-time.Second), true }

// cancelledWhileWaiting is a context that ends right after Wait's first
// check: Err reports nothing on its first call and Canceled after, and
// Done is closed, so a Wait that has to sleep gives its slot back.
type cancelledWhileWaiting struct {
	context.Context
	checked atomic.Bool
}

var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *cancelledWhileWaiting) Done() <-chan struct{} { return closedDone }
func (c *cancelledWhileWaiting) Err() error {
	if c.checked.Swap(true) {
		return context.Canceled
	}
	return nil
}

// RunRate runs one history of cfg and returns it.
func RunRate(cfg RateConfig) ([]porcupine.Operation, error) {
	h := &rateRun{cfg: cfg, rec: NewRecorder()}
	if cfg.MaxKeys == 1 {
		mark := h.rec.evicted
		if !testhook.Evicted.CompareAndSwap(nil, &mark) {
			return nil, errors.New("linearize: RunRate with MaxKeys runs one history at a time")
		}
		defer testhook.Evicted.Store(nil)
	}
	closeAll, err := h.open()
	if err != nil {
		return nil, err
	}
	defer closeAll()
	h.base.Store(int64(time.Millisecond))
	errs := make(chan error, cfg.Workers)
	var wg sync.WaitGroup
	start := make(chan struct{}) // every worker starts at once
	for g := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &rateWorker{rateRun: h, g: g, r: rand.New(rand.NewPCG(cfg.Seed, uint64(g)))}
			<-start
			if err := w.run(); err != nil {
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return h.hist, nil
}

// rateRun is one history of a RateConfig as its workers make it.
type rateRun struct {
	cfg      RateConfig
	rec      *Recorder
	a, b     *hotlimit.Limiter
	minLimit int64 // the least Limit of cfg.Policies
	bucket   bool  // A is a bucket: it has Wait

	base   atomic.Int64 // the shared instant
	nextID atomic.Int64 // the last operation's id

	mu   sync.Mutex
	hist []porcupine.Operation // guarded by mu
}

// open makes A and B, on the recorder's clocks, and returns what closes
// them.
func (h *rateRun) open() (closeAll func(), err error) {
	opts := []hotlimit.Option{hotlimit.WithClock(h.rec.Clock(0)), hotlimit.WithShards(1), hotlimit.WithSweepInterval(0)}
	if h.cfg.MaxKeys == 1 {
		opts = append(opts, hotlimit.WithMaxKeys(1))
	}
	if h.a, err = hotlimit.New(h.cfg.Policies[0], append(opts, h.cfg.Options...)...); err != nil {
		return nil, err
	}
	if h.b, err = hotlimit.New(h.cfg.Gate, hotlimit.WithClock(h.rec.Clock(1)), hotlimit.WithShards(1), hotlimit.WithSweepInterval(0)); err != nil {
		h.a.Close()
		return nil, err
	}
	closeAll = func() { h.b.Close(); h.a.Close() }
	h.minLimit = h.a.Limit()
	for _, p := range h.cfg.Policies {
		l, err := hotlimit.New(p)
		if err != nil {
			closeAll()
			return nil, err
		}
		h.minLimit = min(h.minLimit, l.Limit())
		l.Close()
	}
	switch h.cfg.Policies[0].(type) {
	case hotlimit.TokenBucket, hotlimit.LeakyBucket:
		h.bucket = true
	}
	return closeAll, nil
}

// add appends the steps of client's operations to the history.
func (h *rateRun) add(client int, ops ...porcupine.Operation) {
	h.mu.Lock()
	for _, op := range ops {
		op.ClientId = client
		h.hist = append(h.hist, op)
	}
	h.mu.Unlock()
}

// rateWorker is one goroutine of a history: its random operations, and
// the admission of its last AdmitN, which a later step refunds.
type rateWorker struct {
	*rateRun
	g int
	r *rand.Rand

	held     hotlimit.Admission // an AdmitN's, refunded by a later step
	heldID   int                // its id; 0: none held
	heldKey  string
	heldCost int64
	failed   error // the first harness error: the worker stops
}

// run makes the worker's operations and returns the first harness error.
func (w *rateWorker) run() error {
	for range w.cfg.Ops {
		if w.failed != nil {
			return w.failed
		}
		if err := w.next(); err != nil {
			return err
		}
	}
	return w.failed
}

// record adds the steps of operation in, traced as tr.
func (w *rateWorker) record(in rateIn, out rateOut, tr trace) {
	ops, err := evictSplit(porcupine.Operation{Input: in, Output: out, Call: tr.call, Return: tr.ret}, tr.evicts)
	if err != nil {
		w.failed = cmp.Or(w.failed, err)
	}
	w.add(w.g, ops...)
}

// later returns at followed by n instants, each the one before it or
// later: a clock that moves while one operation runs (between the layers
// of AllowLayers, or while a Wait sleeps).
func (w *rateWorker) later(at int64, n int) []int64 {
	nows := []int64{at}
	for range n {
		if w.r.IntN(2) == 0 {
			at += w.r.Int64N(int64(w.cfg.Step) + 1)
		}
		nows = append(nows, at)
	}
	return nows
}

// next makes one random operation at an instant it picks.
func (w *rateWorker) next() error {
	if w.r.IntN(4) == 0 {
		runtime.Gosched() // vary the interleaving
	}
	// The shared instant moves forward now and then; an operation reads
	// it, or now and then an older one.
	if w.r.IntN(6) == 0 {
		w.base.Add(w.r.Int64N(int64(w.cfg.Step) + 1))
	}
	at := w.base.Load()
	if w.r.IntN(3) == 0 {
		at = max(0, at-w.r.Int64N(2*int64(w.cfg.Step)+1))
	}
	key := fmt.Sprint("k", w.r.IntN(w.cfg.Keys))
	in := rateIn{lim: 0, key: key, at: at, arg: int(w.nextID.Add(1))} // arg: the operation's id, unless set below
	if w.cfg.MaxKeys == 1 && w.g == 0 && w.r.IntN(3) == 0 {
		// A key of its own, new: it evicts whatever A holds.
		in.op, in.key, in.cost = opAllowN, fmt.Sprint("e", w.nextID.Add(1)), 1
		var out rateOut
		w.record(in, out, w.rec.do([]int64{at}, func() { out.d = w.a.AllowN(in.key, 1) }))
		return nil
	}
	x := w.r.IntN(24)
	if !w.bucket && 12 <= x && x < 15 {
		x = 0 // no Wait: an AllowN instead
	}
	return w.on(x, in)
}

// on makes operation x of 24 (a third are AllowN, a sixth AllowLayers)
// with input in.
func (w *rateWorker) on(x int, in rateIn) error {
	a, key, now := w.a, in.key, []int64{in.at}
	var out rateOut
	switch {
	case x < 8:
		in.op, in.cost = opAllowN, w.r.Int64N(w.minLimit+3)-1 // −1 … Limit+1
		w.record(in, out, w.rec.do(now, func() { out.d = a.AllowN(key, in.cost) }))
	case x < 10 && w.heldID != 0: // the Refund of the AdmitN below
		in.op, in.key, in.cost, in.arg = opGiveBack, w.heldKey, w.heldCost, w.heldID
		w.record(in, out, w.rec.do(now, func() { w.held.Refund() }))
		w.heldID = 0
	case x < 10:
		in.op, in.cost = opAdmitN, w.r.Int64N(w.minLimit+3)-1
		tr := w.rec.do(now, func() { out.d = a.AdmitN(&w.held, key, in.cost) })
		if in.back = out.d.Allowed && in.cost > 0; in.back {
			w.heldID, w.heldKey, w.heldCost = in.arg, key, in.cost
		}
		w.record(in, out, tr)
	case x < 11:
		in.op, in.arg = opSetPolicy, w.r.IntN(len(w.cfg.Policies))
		var err error
		tr := w.rec.do(now, func() { err = a.SetPolicy(w.cfg.Policies[in.arg]) })
		if err != nil {
			return err
		}
		w.record(in, out, tr)
	case x < 12:
		in.op = opReset
		w.record(in, out, w.rec.do(now, func() { a.Reset(key) }))
	case x < 15:
		in.cost = 1 + w.r.Int64N(w.minLimit)
		ops, err := runWait(w.rec, a, w.r.IntN(3), in, w.later(in.at, 1))
		if err != nil {
			return err
		}
		w.add(w.g, ops...)
	case x < 16:
		in.op = opSweep
		w.record(in, out, w.rec.do(now, func() { out.n = a.Sweep() }))
	default:
		return w.layers(in)
	}
	return nil
}

// layers makes AllowLayers(A key, B "g" 1), a third of the time with A's
// key in a second layer, or now and then with no layers.
func (w *rateWorker) layers(in rateIn) error {
	a, b, key := w.a, w.b, in.key
	ly := []hotlimit.Layer{{Limiter: a, Key: key, Cost: 1 + w.r.Int64N(w.minLimit)}, {Limiter: b, Key: "g", Cost: 1}}
	if w.r.IntN(3) == 0 { // A's key twice: one limit, for the two costs together
		second := hotlimit.Layer{Limiter: a, Key: key, Cost: 1 + w.r.Int64N(w.minLimit)}
		ly = slices.Insert(ly, 1+w.r.IntN(2), second)
	}
	cost := int64(0)
	for _, l := range ly {
		if l.Limiter == a {
			cost += l.Cost
		}
	}
	if w.r.IntN(20) == 0 { // no layers at all
		in.op = opNoLayers
		var out rateOut
		w.record(in, out, w.rec.do([]int64{in.at}, func() { out.d = hotlimit.AllowLayers() }))
		return nil
	}
	nows := w.later(in.at, 2)
	var d hotlimit.Decision
	each := make([]hotlimit.LayerState, len(ly))
	tr := w.rec.do(nows, func() { d, _ = hotlimit.AllowLayersState(each, ly...) })
	ops, err := splitLayers(in.arg, key, cost, nows, d.Allowed, each[0].Decision, each[slices.IndexFunc(ly, func(l hotlimit.Layer) bool { return l.Limiter == b })].Decision, tr)
	if err != nil {
		return err
	}
	w.add(w.g, ops...)
	return nil
}

// runWait runs A.Wait(in.key, in.cost) with a context of the given kind
// (0: none; 1: its deadline passed between Wait's checks; 2: cancelled as
// soon as Wait sleeps) on the instants nows (the first for the
// reservation, the second for a give-back), and returns its steps: one
// operation when it was admitted or refused at once; when it gave its slot
// back, the reservation and the give-back, cut at the give-back's first
// clock read (the reservation reads the clock once, first). Either way,
// an eviction for its key comes first (see evictSplit). in.arg is the
// Wait's id.
func runWait(rec *Recorder, a *hotlimit.Limiter, kind int, in rateIn, nows []int64) ([]porcupine.Operation, error) {
	var ctx context.Context = context.Background()
	in.op, in.maxWait = opWait, math.MaxInt64
	switch kind {
	case 1:
		ctx, in.maxWait = deadlinePassed{ctx}, -1
	case 2:
		ctx = &cancelledWhileWaiting{Context: ctx}
	}
	var err error
	tr := rec.do(nows, func() { err = a.Wait(ctx, in.key, in.cost) })
	call, ret, reads := tr.call, tr.ret, tr.reads
	if err == nil || kind != 2 || !errors.Is(err, context.Canceled) {
		return evictSplit(porcupine.Operation{Input: in, Output: rateOut{allowed: err == nil}, Call: call, Return: ret}, tr.evicts)
	}
	// Cancelled while it slept: it reserved, then gave its slot back. The
	// give-back reads the clock only when it finds the reservation's entry
	// (a Reset or a sweep may have removed it): the cut is at its first
	// read; without one, both steps span the rest of the call (the
	// give-back follows the reservation's read, and the model places it
	// after the reservation).
	resEnd, gbStart := ret, reads[0].tick
	if len(reads) > 1 {
		resEnd, gbStart = reads[1].tick, reads[1].tick
	}
	res, gb := in, in
	res.op, res.back = opWaitReserve, true
	gb.op, gb.at = opGiveBack, nows[1]
	ops, err := evictSplit(porcupine.Operation{Input: res, Output: rateOut{allowed: true}, Call: call, Return: resEnd}, tr.evicts)
	return append(ops, porcupine.Operation{Input: gb, Output: rateOut{}, Call: gbStart, Return: ret}), err
}

// evictSplit returns the steps of op, an operation on A whose evictions
// the recorder marked at the ticks evicts (Recorder.evicted): op itself
// when it evicted nothing, else an eviction (opEvict) from op's call to
// the mark, then op's decision from the mark to its return. An insertion
// into a full A evicts, then decides its key as a key with no entry
// (owing until sweptAt: Limiter.vacant) under the table of that moment
// (keys.go, lockSlotFirst), and a Sweep, a
// Reset, a SetPolicy or a peek can land in between: one step could not be
// both after a Sweep that raised sweptAt and before a peek that already
// found the victim gone. An operation inserts once, so it evicts at most
// once, inside op.
func evictSplit(op porcupine.Operation, evicts []int64) ([]porcupine.Operation, error) {
	if len(evicts) == 0 {
		return []porcupine.Operation{op}, nil
	}
	in := op.Input.(rateIn)
	if len(evicts) > 1 || evicts[0] < op.Call || evicts[0] > op.Return || in.lim != 0 {
		return []porcupine.Operation{op}, fmt.Errorf("linearize: %s on %s evicted at ticks %v, not once within its step [%d, %d]", rateOpNames[in.op], in.key, evicts, op.Call, op.Return)
	}
	ev := rateIn{op: opEvict, lim: 0, key: in.key, at: in.at, arg: in.arg}
	in.evicted = true
	return []porcupine.Operation{
		{Input: ev, Output: rateOut{}, Call: op.Call, Return: evicts[0]},
		{Input: in, Output: op.Output, Call: evicts[0], Return: op.Return},
	}, nil
}

// splitLayers cuts AllowLayers(A key …, B "g" 1) into the steps it takes,
// each between two of its clock reads (each layer's step reads the clock
// first): A's admission step (for cost, the costs of every layer on A's
// key together, which AllowLayers decides as one), B's, and A's give-back
// when B refused. The reads return nows in turn: A's admission reads
// nows[0], B's nows[1], and everything after nows[2]. The checks that
// build a denied Decision read the clock too and change nothing. The
// reads tell the cases apart:
//
//	allowed:             A B          → A admits, B admits
//	denied, A refused:   A B          → A refuses (B only checked)
//	denied, B refused:   A B A…       → A admits, B refuses, A gives back (and A is checked)
//
// The give-back reads the clock only when it finds the admission's entry,
// so it is placed between B's read and the call's return. An eviction for
// A's key comes before A's step's decision, within it (see evictSplit).
func splitLayers(id int, key string, cost int64, nows []int64, allowed bool, da, db hotlimit.Decision, tr trace) ([]porcupine.Operation, error) {
	ops, err := splitLayerReads(id, key, cost, nows, allowed, da, db, tr.ret, tr.reads)
	if err != nil {
		return nil, err
	}
	first, err := evictSplit(ops[0], tr.evicts)
	return append(first, ops[1:]...), err
}

// splitLayerReads is splitLayers before the eviction's cut.
func splitLayerReads(id int, key string, cost int64, nows []int64, allowed bool, da, db hotlimit.Decision, ret int64, reads []clockRead) ([]porcupine.Operation, error) {
	lims := make([]int, len(reads))
	for i, r := range reads {
		lims[i] = r.lim
	}
	// da and db are A's and B's own Decisions (AllowLayersState): their
	// steps' Decisions, except A's when B refused (a check after the
	// give-back then).
	step := func(lim int, k string, c int64, ok, back bool, at, from, to int64, d *hotlimit.Decision) porcupine.Operation {
		in := rateIn{op: opLayerAllow, lim: lim, key: k, cost: c, arg: id, at: at, back: back}
		out := rateOut{allowed: ok}
		if d != nil {
			in.whole, out.d = true, *d
		}
		return porcupine.Operation{Input: in, Output: out, Call: from, Return: to}
	}
	bRefused := len(lims) > 2 && slices.Equal(lims[:2], []int{0, 1}) && !slices.Contains(lims[2:], 1)
	switch {
	case allowed && slices.Equal(lims, []int{0, 1}):
		return []porcupine.Operation{
			step(0, key, cost, true, false, nows[0], reads[0].tick, reads[1].tick, &da),
			step(1, "g", 1, true, false, nows[1], reads[1].tick, ret, &db),
		}, nil
	case !allowed && slices.Equal(lims, []int{0, 1}):
		return []porcupine.Operation{step(0, key, cost, false, false, nows[0], reads[0].tick, reads[1].tick, &da)}, nil
	case !allowed && bRefused:
		return []porcupine.Operation{
			step(0, key, cost, true, true, nows[0], reads[0].tick, reads[1].tick, nil),
			step(1, "g", 1, false, false, nows[1], reads[1].tick, reads[2].tick, &db),
			{
				Input:  rateIn{op: opGiveBack, lim: 0, key: key, cost: cost, arg: id, at: nows[2]},
				Output: rateOut{},
				Call:   reads[1].tick, Return: ret,
			},
		}, nil
	}
	return nil, fmt.Errorf("linearize: AllowLayers (allowed %v) read the clocks of limiters %v: not a sequence this harness knows", allowed, lims)
}

// CheckRate runs a history of cfg and checks it against the reference
// model, giving up after timeout (porcupine's search is exponential in the
// worst case). It returns the history's length and the verdict.
func CheckRate(cfg RateConfig, timeout time.Duration) (int, porcupine.CheckResult, porcupine.LinearizationInfo, error) {
	n, res, info, _, err := checkRate(cfg, timeout)
	return n, res, info, err
}

// checkRate is CheckRate that also counts the history's steps by kind
// (see describeKinds).
func checkRate(cfg RateConfig, timeout time.Duration) (int, porcupine.CheckResult, porcupine.LinearizationInfo, map[string]int, error) {
	hist, err := RunRate(cfg)
	if err != nil {
		return 0, porcupine.Unknown, porcupine.LinearizationInfo{}, nil, err
	}
	res, info := porcupine.CheckOperationsVerbose(rateModel(cfg), hist, timeout)
	return len(hist), res, info, stepKinds(hist), nil
}

// stepKinds counts a history's steps by what they exercise: each
// operation by name, and the cases the harness sets out to reach (a Wait
// refused by a passed deadline, a give-back, one whose admission's entry
// was gone, AllowLayers with A's key twice, a clock that moved between
// layers).
func stepKinds(hist []porcupine.Operation) map[string]int {
	k := map[string]int{}
	for _, op := range hist {
		in, out := op.Input.(rateIn), op.Output.(rateOut)
		k[rateOpNames[in.op]]++
		switch {
		case in.op == opWait && in.maxWait < 0:
			k["Wait past its deadline"]++
		case in.op == opLayerAllow && in.lim == 0 && out.allowed && in.back:
			k["layer given back"]++
		case in.op == opAllowN && strings.HasPrefix(in.key, "e"):
			k["AllowN on a key of its own"]++
		}
	}
	return k
}

// Model returns the porcupine model CheckRate uses, for a visualization of
// a failed history (porcupine.VisualizePath).
func Model(cfg RateConfig) porcupine.Model { return rateModel(cfg) }
