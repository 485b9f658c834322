package linearize

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotlimit/hotlimit"
)

// Recorder times the operations of a history and gives each one its own
// clock reading.
//
// Time with a shared clock is not linearizable as such: a goroutine reads
// the clock, is preempted, and makes its decision on that reading after
// others have decided on later ones. The limiter's contract is a function
// of the state and the reading ("a reading older than what a key's state
// reflects counts as no time having passed"), so each operation here
// carries the instant it reads as part of its input: the clock the
// limiters read returns, to each goroutine, the instant of the operation
// that goroutine is running. The generator moves that instant forward as
// the history goes on, and gives some operations an older instant (a
// goroutine preempted between its clock read and its write, or a clock set
// back). Every clock read is also logged with a tick of the recorder's
// logical clock, which is how an AllowLayers call is cut into the steps
// it takes on each layer (see splitLayers).
type Recorder struct {
	tick atomic.Int64 // logical time: calls, returns and clock reads
	mu   sync.Mutex
	ops  map[int64]*running // goroutine id → the operation it runs
}

type running struct {
	nows   []int64 // the instant of each clock read; the last repeats
	reads  []clockRead
	evicts []int64 // the tick of each eviction it made (see Recorder.evicted)
}

// clockRead is one clock read by an operation: which limiter read it, and
// when (a tick).
type clockRead struct {
	lim  int
	tick int64
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{ops: map[int64]*running{}} }

// Clock returns the clock limiter lim reads.
func (r *Recorder) Clock(lim int) hotlimit.Clock { return &opClock{r: r, lim: lim} }

type opClock struct {
	r   *Recorder
	lim int
}

// Now returns the instant of the operation the calling goroutine runs:
// for its i-th clock read, the i-th of the operation's instants (the last
// one for every read after). A goroutine running none (a background
// sweeper, which the histories turn off) reads 0.
func (c *opClock) Now() time.Duration {
	id := goid()
	c.r.mu.Lock()
	op := c.r.ops[id]
	if op == nil {
		c.r.mu.Unlock()
		return 0
	}
	now := op.nows[min(len(op.reads), len(op.nows)-1)]
	op.reads = append(op.reads, clockRead{c.lim, c.r.tick.Add(1)})
	inside := len(op.reads) > 1
	c.r.mu.Unlock()
	if inside {
		// A read inside an operation: let other goroutines run here, as a
		// preemption would, between the steps of a layered request or a
		// Wait, or between a give-back's check of its entry and its write.
		runtime.Gosched()
	}
	return time.Duration(now)
}

// evicted marks, with a tick, that the operation the calling goroutine
// runs has just evicted an entry to make room for its key, and has not
// yet decided on that key (internal/testhook.Evicted). It then lets other
// goroutines run, as a preemption would: a Sweep, a Reset or a peek may
// land between the eviction and the decision.
func (r *Recorder) evicted() {
	id := goid()
	r.mu.Lock()
	if op := r.ops[id]; op != nil {
		op.evicts = append(op.evicts, r.tick.Add(1))
	}
	r.mu.Unlock()
	runtime.Gosched()
}

// trace is what the recorder saw of one operation: its call and return
// ticks, its clock reads and the ticks of its evictions.
type trace struct {
	call, ret int64
	reads     []clockRead
	evicts    []int64
}

// do runs f as one operation on the calling goroutine, its clock reads
// returning the instants nows in turn (a clock that moves while the
// operation runs; see opClock.Now), and returns its trace.
func (r *Recorder) do(nows []int64, f func()) trace {
	id := goid()
	op := &running{nows: nows}
	r.mu.Lock()
	r.ops[id] = op
	r.mu.Unlock()
	call := r.tick.Add(1)
	f()
	ret := r.tick.Add(1)
	r.mu.Lock()
	delete(r.ops, id)
	r.mu.Unlock()
	return trace{call, ret, op.reads, op.evicts}
}

// goid returns the calling goroutine's id, read from its stack header
// ("goroutine 42 [running]:"). It is slow (about a microsecond), which the
// histories can afford.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	b = b[:bytes.IndexByte(b, ' ')]
	id, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		panic("linearize: cannot read the goroutine id: " + err.Error())
	}
	return id
}
