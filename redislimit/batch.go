package redislimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hotlimit/hotlimit/redislimit/internal/luasrc"
	"github.com/redis/go-redis/v9"
)

// Batching: decisions bound for one server that arrive while earlier ones
// are in flight go out together, as one script call that decides them in
// order (batch.lua). Redis runs one command at a time, and most of what a
// small script costs it is the command around it (reading, parsing and
// dispatching the call, starting the script, writing the reply); a batch
// pays that once for many decisions, so under many concurrent callers a
// server decides several times more per second and per CPU second
// (the redisbench module's RESULTS.md,
// https://github.com/hotlimit/hotlimit/blob/main/bench/redisbench/RESULTS.md).
//
// A call that finds fewer than maxBatchesInFlight batches in flight (on a
// Cluster, clusterBatchesInFlight per master) and
// none queued is sent at once, alone, on its own goroutine (a serial
// caller never waits for a batch); otherwise it queues, and the sender of
// the next batch to finish sends every queued call (up to maxBatch) as one
// batch, on a goroutine of its own. Each caller waits for its reply or
// for its own context, whichever comes first. A batch is one call: a timeout or an outage fails it as a whole,
// while a script error of one decision (its key holds another type) fails
// that decision alone, as it would have alone (batch.lua); a call that left
// the queue before it was sent (its context ended, or its timeout passed)
// sent nothing. Each
// caller reports the batch's call to its own limiter's hooks, on its own
// goroutine, with the error it got (a caller that left a batch in flight:
// its context's, when it left). The batch
// carries the latest deadline of its calls, so that a call with little
// time left (its caller's deadline) fails no other call, but no later
// than the earliest end of its calls' timeouts (WithTimeout, from each
// call's start): a call bounded by its timeout waits for its batch, which
// ends by then, rather than on a context and a timer of its own, made
// for every call (on a single server; a Cluster's call has its context,
// which bounds finding its node too). A call that ends so is bounded by
// its timeout still; one that started later than the batch's first can
// end sooner than its own timeout, by at most the time between the two
// starts. It is sent with the values of its first
// call's context (the oldest caller's), without that context's
// cancellation: a go-redis hook sees that caller's values (a trace span)
// for the whole batch.
//
// On a Redis Cluster each master has a batcher of its own: decisions bound
// for one node batch together whatever their slots, as one call of
// clusterBatchScript, which passes no key in KEYS (a call's declared keys
// must share a slot) but each decision's keys in ARGV, and which Redis 7
// lets touch keys of several slots of the node it runs on (the script's
// allow-cross-slot-keys flag). The node still checks every key the script
// touches: a key it does not hold (its slot moved, or is migrating and
// the key is gone already) fails that decision's first read with a
// "non local key" error, before it wrote anything, and that decision is
// then sent again alone by its caller, on its caller's context, which
// follows the MOVED or ASK reply as any call does. A batch the node
// refuses as a whole (a reply error: nothing ran) is sent again decision
// by decision the same way; a server older than Redis 7, which cannot
// compile the flag, turns the client's batching on the Cluster off.
//
// Decisions with a test instant go alone, as do a *redis.Ring's and any
// other Scripter's.

// maxBatchesInFlight bounds the batches one server has in flight from one
// client: enough to keep the server busy while replies travel, few enough
// that the calls waiting meanwhile form large batches.
const maxBatchesInFlight = 2

// clusterBatchesInFlight is maxBatchesInFlight for each master of a
// Cluster, whose batches are smaller (a client's callers spread over its
// masters) and which the client keeps busy in turn: one batch in flight
// per master decided more per second, for less of the masters' CPU per
// decision, than two (the redisbench module's RESULTS.md).
const clusterBatchesInFlight = 1

// maxBatch bounds the decisions in one batch, so that one script call
// stays short (a few hundred µs) and other clients are not held up.
const maxBatch = 64

//go:embed batch.lua
var batchTail string

// batchScript is the common start (luasrc.Start), then windows.lua's
// fixed windows and script.lua's decision as a function, then batch.lua,
// which calls one of them once per decision of a batch.
var batchScript = newScript(luasrc.Start + windowsSource + decideFunc + "local inline = false\n" + batchTail)

// clusterBatchScript is batchScript for a node of a Redis Cluster, each
// decision's keys in ARGV (inline): see above.
var clusterBatchScript = newScript("#!lua flags=allow-cross-slot-keys\n" + luasrc.Start + windowsSource + decideFunc + "local inline = true\n" + batchTail)

var decideFunc = "local function decide(KEYS, ARGV)\n" + decideSource + "\nend\n"

// batchCall is one decision waiting for, or in, a batch.
type batchCall struct {
	client   redis.Scripter // the node's, as route returned it
	node     string
	keys     []string
	args     []any // script.lua's arguments for the call alone: "", 5 per layer, the next flag if next
	next     bool
	windows  bool      // every layer is a fixed window: batch.lua's short form, 3 arguments a layer
	deadline time.Time // the earlier of until and its caller's deadline
	until    time.Time // its timeout (WithTimeout) from its start; zero: none (tests)
	hooks    *Hooks
	ctx      context.Context // the caller's, for its values; nil: none (tests)

	wake  chan struct{} // receives once, buffered: the reply is in
	sent  time.Time     // guarded by the batcher's mu: when its batch was taken to be sent
	reply []any         // written before wake, read after it
	short bool          // written before wake, read after it: reply is windows.lua's short reply, of a batch decided at now (µs)
	now   int64
	err   error
	calls []attempt // written before wake, read after it: what the hooks' Call is told
	alone bool      // written before wake, read after it: to be sent again alone (see above)
}

// attempt is one script call of a batch, as Hooks.Call reports it.
type attempt struct {
	node string
	took time.Duration
	err  error
}

// report tells c's hooks, on the caller's goroutine, about the calls its
// batch made: the last one with the error c got (its own decision's
// script error, when the call itself succeeded).
func (c *batchCall) report() {
	for i, a := range c.calls {
		err := a.err
		if i == len(c.calls)-1 && err == nil {
			err = c.err
		}
		reportCall(c.hooks, a.node, a.took, err)
	}
}

// batcher batches the decisions sent to one server (see above).
type batcher struct {
	r       *router
	node    string // the server's address
	cluster bool   // a Cluster's node: clusterBatchScript
	turns   int    // the most batches (or lone calls) in flight

	mu       sync.Mutex
	queue    []*batchCall // guarded by mu: calls waiting for a batch
	inFlight int          // guarded by mu: batches being sent
}

// do sends bc, alone or in a batch, and returns its reply, or its
// context's error when the context ends first. The reply is script.lua's
// integers, or, when now is not -1, windows.lua's short reply of an
// admission in a batch decided at the instant now (µs): each layer's
// Remaining (see fixedWindows). When the context ends first, a call
// still queued leaves the queue (nothing was sent: the error wraps
// errNotSent too), and a call in a batch in flight leaves the batch to
// finish without it: its decision may or may not have been made, as for
// a call sent alone whose context ends.
func (b *batcher) do(ctx context.Context, bc *batchCall) (reply []any, now int64, err error) {
	b.mu.Lock()
	if b.inFlight < b.turns && len(b.queue) == 0 {
		// Alone, the serial caller's case: sent on its own goroutine.
		b.inFlight++
		b.mu.Unlock()
		vals, err := bc.sendAlone(ctx, b.r)
		b.next()
		return vals, -1, err
	}
	bc.wake, bc.ctx = make(chan struct{}, 1), ctx
	if b.inFlight < b.turns {
		b.inFlight++
		batch := b.takeLocked(bc)
		b.mu.Unlock()
		go b.sendAll(batch)
	} else {
		b.queue = append(b.queue, bc)
		b.mu.Unlock()
	}
	select {
	case <-bc.wake:
		bc.report()
		if bc.alone {
			vals, err := bc.sendAlone(ctx, b.r)
			return vals, -1, err
		}
		if bc.short {
			return bc.reply, bc.now, bc.err
		}
		return bc.reply, -1, bc.err
	case <-ctx.Done():
		b.mu.Lock()
		i := slices.Index(b.queue, bc)
		if i >= 0 {
			b.queue = slices.Delete(b.queue, i, i+1)
		}
		sent := bc.sent
		b.mu.Unlock()
		if i >= 0 {
			// Nothing was sent: that says nothing about the node (see
			// settle), and there is no call to report.
			return nil, -1, fmt.Errorf("%w: %w", errNotSent, ctx.Err())
		}
		// Its batch is in flight: for this caller, the call failed now.
		reportCall(bc.hooks, b.node, time.Since(sent), ctx.Err())
		return nil, -1, ctx.Err()
	}
}

// sendAlone sends c alone on r, on ctx bounded by c.until.
func (c *batchCall) sendAlone(ctx context.Context, r *router) ([]any, error) {
	if !c.until.IsZero() {
		var cancel context.CancelFunc
		if ctx, cancel = boundedBy(ctx, c.until); cancel != nil {
			defer cancel()
		}
	}
	return r.send(ctx, decideScript, c.client, c.node, c.hooks, c.keys, c.args)
}

// errNotSent wraps the context's error of a call that left the queue
// before it was sent: no circuit counts it, whichever way its context
// ended.
var errNotSent = errors.New("redislimit: the call was not sent")

// takeLocked returns the queued calls, up to maxBatch, then self when it
// is not nil and fits; it requires that b.mu is held.
func (b *batcher) takeLocked(self *batchCall) []*batchCall {
	n := min(len(b.queue), maxBatch)
	batch := make([]*batchCall, 0, n+1)
	batch = append(batch, b.queue[:n]...)
	b.queue = slices.Delete(b.queue, 0, n)
	if self != nil {
		batch = append(batch, self)
	}
	now := time.Now()
	for _, c := range batch {
		c.sent = now
	}
	return batch
}

// sendAll sends batch, wakes its calls with their replies, then sends the
// calls queued meanwhile, batch after batch, until none is queued; it
// holds one of the in-flight turns throughout. It runs on a goroutine of
// its own, so that no caller waits for a batch past its own context.
func (b *batcher) sendAll(batch []*batchCall) {
	for {
		b.sendMany(batch, "")
		for _, c := range batch {
			c.wake <- struct{}{} // buffered: never blocks
		}
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.inFlight--
			b.mu.Unlock()
			return
		}
		batch = b.takeLocked(nil)
		b.mu.Unlock()
	}
}

// next ends the in-flight turn of a call sent alone: it hands the turn to
// the calls queued meanwhile, or gives it up.
func (b *batcher) next() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.inFlight--
		b.mu.Unlock()
		return
	}
	batch := b.takeLocked(nil)
	b.mu.Unlock()
	go b.sendAll(batch)
}

// sendMany sends the calls of batch as one call of batchScript, under the
// latest of their deadlines (a call whose caller's deadline comes first
// has left by then: see do; the earliest would fail calls that alone
// would have been decided), but no later than the earliest of their
// untils (see above), and sets each call's reply or error. now is the instant
// to decide at, "" for the server's (only tests pass another).
func (b *batcher) sendMany(batch []*batchCall, now string) {
	if batch = inTime(batch); len(batch) == 0 {
		return
	}
	script := batchScript
	if b.cluster {
		script = clusterBatchScript
	}
	keys, args, dl := b.batchArgs(batch, now)
	// Each caller reports the calls to its own hooks, on its own
	// goroutine (batchCall.report), or its own failure if it left.
	var calls []attempt
	hooks := &Hooks{Call: func(node string, took time.Duration, err error) {
		calls = append(calls, attempt{node, took, err})
	}}
	// The batch goes out with its first caller's values (a go-redis hook
	// tracing it sees that caller's span), not with its cancellation: the
	// batch runs until its deadline (batchArgs).
	parent := batch[0].ctx
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(parent), dl)
	client := redis.Scripter(b.r.single)
	if b.cluster {
		client = batch[0].client // the node's (every call of a batch has it)
	}
	vals, err := b.r.send(ctx, script, client, b.node, hooks, keys, args)
	cancel()
	b.settleBatch(batch, vals, err, calls)
}

// inTime returns the calls of batch whose until has not passed (batch
// itself when none has), and fails the others, unsent: they leave the
// queue at their timeout, as a call whose context ends does (see do).
func inTime(batch []*batchCall) []*batchCall {
	now := time.Now()
	late := func(c *batchCall) bool { return !c.until.IsZero() && !now.Before(c.until) }
	if !slices.ContainsFunc(batch, late) {
		return batch
	}
	for _, c := range batch {
		if late(c) {
			c.err = fmt.Errorf("%w: %w", errNotSent, context.DeadlineExceeded)
		}
	}
	return slices.DeleteFunc(slices.Clone(batch), late)
}

// batchArgs returns the keys and arguments of batch.lua's call for batch
// (on a Cluster's node, each decision's keys inline in the arguments),
// and its deadline: the latest deadline of its calls, or the earliest of
// their untils when that comes first.
func (b *batcher) batchArgs(batch []*batchCall, now string) (keys []string, args []any, dl time.Time) {
	nk, na := 0, 2
	dl = batch[0].deadline
	var until time.Time // the earliest of the calls' untils
	for _, c := range batch {
		nk += len(c.keys)
		na += 1 + c.stride()*len(c.keys)
		if c.deadline.After(dl) {
			dl = c.deadline
		}
		if !c.until.IsZero() && (until.IsZero() || c.until.Before(until)) {
			until = c.until
		}
	}
	if !until.IsZero() && until.Before(dl) {
		dl = until
	}
	if b.cluster {
		na += nk
	} else {
		keys = make([]string, 0, nk)
	}
	args = make([]any, 0, na)
	args = append(args, now, len(batch))
	for _, c := range batch {
		head := 4 * len(c.keys)
		if c.next {
			head += 2
		}
		if c.windows {
			head++
		}
		args = append(args, head)
		if b.cluster {
			for _, k := range c.keys {
				args = append(args, k)
			}
		} else {
			keys = append(keys, c.keys...)
		}
		layers := c.args[1 : 1+5*len(c.keys)]
		if !c.windows {
			args = append(args, layers...)
			continue
		}
		for i := 0; i < len(layers); i += 5 {
			args = append(args, layers[i+1], layers[i+3], layers[i+4]) // W, limit, cost
		}
	}
	return keys, args, dl
}

// stride is the number of batch.lua's arguments a layer of c takes: 3
// in the short form of fixed windows, else script.lua's 5.
func (c *batchCall) stride() int {
	if c.windows {
		return 3
	}
	return 5
}

// settleBatch sets each call of batch's reply or error from the batch
// call's (vals, err), and the calls it made.
func (b *batcher) settleBatch(batch []*batchCall, vals []any, err error, calls []attempt) {
	if b.cluster && err != nil && isReplyError(err) {
		// Refused as a whole, so nothing ran: each decision goes again
		// alone (see above).
		if strings.Contains(err.Error(), "Error compiling script") {
			b.r.noClusterBatch.Store(true)
		}
		for _, c := range batch {
			c.calls, c.err, c.alone = calls, err, true
		}
		return
	}
	var now int64
	if err == nil && !batchReplyFits(batch, vals) {
		err = errBadReply(vals)
	} else if err == nil {
		now = vals[0].(int64)
	}
	j := 1 // vals[j]: the next call's reply
	for _, c := range batch {
		c.calls = calls
		if err != nil {
			c.err = err
			continue
		}
		switch r := vals[j].(type) {
		case []any:
			c.reply = r
		case error: // this decision's script error (batch.lua): its own
			c.err = r
			c.alone = b.cluster && strings.Contains(r.Error(), "non local key")
		default: // the short reply (batchReplyFits)
			n := len(c.keys)
			c.reply, c.short, c.now = vals[j+1:j+1+n:j+1+n], true, now
			j += n
		}
		j++
	}
}

// batchReplyFits reports whether vals is batch.lua's reply to batch: the
// instant, then for each call an array, an error, or the short reply (2,
// then an integer per layer), and nothing after them.
func batchReplyFits(batch []*batchCall, vals []any) bool {
	if len(vals) == 0 {
		return false
	}
	if now, ok := vals[0].(int64); !ok || now < 0 {
		return false
	}
	j := 1
	for _, c := range batch {
		if j >= len(vals) {
			return false
		}
		switch r := vals[j].(type) {
		case []any, error:
		case int64:
			n := len(c.keys)
			if r != 2 || j+n >= len(vals) {
				return false
			}
			for _, v := range vals[j+1 : j+1+n] {
				if _, ok := v.(int64); !ok {
					return false
				}
			}
			j += n
		default:
			return false
		}
		j++
	}
	return j == len(vals)
}

// batcherFor returns the batcher of the node at addr, or nil when the
// router's client is not batched.
func (r *router) batcherFor(addr string) *batcher {
	switch {
	case r.single != nil:
		return r.batch
	case r.cluster == nil || r.noClusterBatch.Load():
		return nil
	}
	if b, ok := r.batches.Load(addr); ok {
		return b.(*batcher)
	}
	b, _ := r.batches.LoadOrStore(addr, &batcher{r: r, node: addr, cluster: true, turns: clusterBatchesInFlight})
	return b.(*batcher)
}
