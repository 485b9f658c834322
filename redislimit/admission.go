package redislimit

import (
	"context"
	"sync/atomic"

	"github.com/hotlimit/hotlimit"
)

// An Admission records one admission that Limiter.AdmitN made, so that
// Refund can give it back when the work it paid for did not happen. It
// refers to the admission, not to the key: the key's state in Redis as an
// incarnation (a state deleted by Reset, or left fresh by a give-back, and
// created again is another incarnation), the admission's cost, and its
// mark (for the buckets the TAT it left, for the windows the window it
// counted in, for the sliding log the instant it was logged at). Refund
// gives back only what the state still owes to that admission, by the
// rules of hotlimit's Admission (docs/semantics.md, "Give-backs"):
//
//   - nothing once the key's state was deleted since (Reset, or a
//     give-back that left it fresh), even when the key has a state again;
//   - the buckets: the part of cost·T that has not drained, min(cost·T,
//     E − now) with E the TAT the admission left, never making the bucket
//     fuller than full. A give-back of an earlier admission (one below it
//     in the bucket) moves its units down: that give-back renews the
//     state, and this one then replays the renewals since, returning
//     exactly what its units still hold, unless it has seen more than 16
//     (then no more than they hold: see ops.lua, "Renewals");
//   - the fixed window: cost off the count while the state is in the
//     admission's window; the sliding window: also cost off the previous
//     count in the window after it; nothing later;
//   - the sliding log: up to cost of the newest admitted units logged no
//     later than the admission that still count.
//
// So no sequence of calls lets a key admit more than its policy allows.
//
// The zero Admission records nothing: its Refund gives nothing back. An
// Admission is filled by AdmitN (which keeps a reference to the key
// string, and allocates nothing else for it), may be reused for another
// AdmitN once its Refund is no longer wanted, is safe for concurrent use
// by Refund, and must not be copied after first use.
type Admission struct {
	_     noCopy
	l     *Limiter
	key   string
	inc   int64 // the incarnation of key's state (0: the first; see ops.lua)
	mark  int64 // E, the window index or the instant (see script.lua), µs or index
	cost  int64
	spent atomic.Bool
}

// noCopy makes go vet's copylocks check report copies of an Admission.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// AdmitN is AllowN that also records in a the admission it makes, for
// Admission.Refund: a is overwritten, and records an admission only when
// the Decision is Allowed, cost > 0 and Redis decided (a nil error). In
// lease mode (WithLeases), and for a decision the failure
// policy made, a records nothing. One round trip, like AllowN, but never
// coalesced with other callers' decisions (batch.go).
func (l *Limiter) AdmitN(ctx context.Context, a *Admission, key string, cost int64) (hotlimit.Decision, error) {
	a.l, a.key, a.inc, a.mark, a.cost = nil, "", 0, 0, 0
	a.spent.Store(false)
	if l.leases != nil || cost <= 0 || cost > l.spec.limit || len(key) > hotlimit.MaxKeyLen {
		return l.AllowN(ctx, key, cost)
	}
	d, _, err := allowRecorded(ctx, []Layer{{Limiter: l, Key: key, Cost: cost}}, nil, a)
	return d, err
}

// Refund gives back what the key's state still owes to the admission a
// records (see Admission), as if the request had not been admitted, and
// reports whether this call spent a: only the first Refund of a filled
// Admission does; the others, and a Refund of the zero Admission, do
// nothing (as hotlimit's Admission.Refund). It also drops this instance's
// cached denial of the key (WithLocalDenials), which the give-back may
// have made untrue.
//
// One round trip when it spends a. An error wraps ErrUnavailable, and then
// the give-back may or may not have happened; a is spent either way (a
// give-back is never retried).
func (a *Admission) Refund(ctx context.Context) (bool, error) {
	if a.l == nil || !a.spent.CompareAndSwap(false, true) {
		return false, nil
	}
	l := a.l
	if l.cache != nil {
		l.cache.del(a.key)
	}
	_, err := l.op(ctx, "refund", a.key, a.cost, a.inc, a.mark)
	return true, err
}

// incKey returns the Redis key that holds key's incarnation, in the slot
// of RedisKey(key): RedisKey with "#" in place of the ":" after the name
// ("%" in place of "!" for the keys RedisKey stores apart). No state key
// ends its name part with either, so no incarnation key is a state key.
func (l *Limiter) incKey(key string) string {
	if l.ispec != "" && (key == "" || key[0] == '}') {
		return l.ispec + key
	}
	return l.ihead + key + l.tail
}
