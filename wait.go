package hotlimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Errors returned by Wait.
var (
	// ErrInvalidCost: the cost is negative or above the policy's Limit,
	// so the request can never be admitted.
	ErrInvalidCost = errors.New("hotlimit: cost is negative or exceeds the policy's limit")
	// ErrDeadline: the request could not be admitted before the context's
	// deadline; nothing was consumed.
	ErrDeadline = errors.New("hotlimit: request would not be admitted before the context deadline")
	// ErrKeyTooLong: the key is longer than MaxKeyLen.
	ErrKeyTooLong = errors.New("hotlimit: key longer than MaxKeyLen")
)

// Wait blocks until a request of the given cost for key is admitted, or
// returns an error without consuming anything.
//
// For the token and leaky buckets, Wait reserves the request's slot at
// once (consuming it) and sleeps until the slot: the instant the request
// fits for the token bucket, the start of its turn for the leaky bucket.
// If the context's deadline is before the slot, Wait fails at once with
// ErrDeadline; if the context ends while it sleeps, it gives the slot back
// and returns the context's error. For the window policies, which cannot
// hold a reservation in a future window, Wait sleeps until RetryAfter and
// tries again, so it is not first-come first-served under contention.
//
// Wait sleeps in real time, whatever the limiter's clock. It returns
// ErrInvalidCost for a cost below 0 or above Limit, and ErrKeyTooLong.
// Unlike Allow and AllowN, Wait always takes the cost: there is no
// one-unit form.
func (l *Limiter) Wait(ctx context.Context, key string, cost int64) error {
	if limit := l.p.Load().limit; cost < 0 || cost > limit {
		return fmt.Errorf("%w: cost %d, limit %d", ErrInvalidCost, cost, limit)
	}
	if len(key) > MaxKeyLen {
		return ErrKeyTooLong
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if cost == 0 {
		return nil
	}
	maxWait := int64(math.MaxInt64)
	if dl, ok := ctx.Deadline(); ok {
		maxWait = int64(time.Until(dl))
	}
	if !l.kind.isBucket() {
		return l.waitWindow(ctx, key, cost)
	}
	wait, a, ok := l.reserve(key, cost, maxWait)
	if !ok {
		return fmt.Errorf("%w: would wait %v", ErrDeadline, time.Duration(wait))
	}
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(wait))
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		t.Stop()
		l.giveBack(key, cost, a) // the slot back; Stats count it as Refunded
		return ctx.Err()
	}
}

func (l *Limiter) waitWindow(ctx context.Context, key string, cost int64) error {
	for {
		d := l.AllowN(key, cost)
		if d.Allowed {
			return nil
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d.RetryAfter {
			return fmt.Errorf("%w: would wait %v", ErrDeadline, d.RetryAfter)
		}
		t := time.NewTimer(d.RetryAfter)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// reserve takes a slot for Wait (see gcra.reserve) and returns, when it
// did, what giving it back needs (refund.go).
func (l *Limiter) reserve(key string, cost, maxWait int64) (wait int64, a admission, ok bool) {
	now := l.now()
	h := l.hash(key)
	s := l.shardOf(h)
	t := s.tab.Load()
	if sl := t.find(h, key); sl != nil {
		if wait, end, ok, live := reserveAt(t.p, &sl.word, now, cost, maxWait); live {
			l.tally.count(ok)
			if ok {
				a = t.p.admitted(s.incarnation(sl), now, end, cost)
			}
			return wait, a, ok
		}
	}
	var end int64
	sl, now, decided := l.lockSlotFirst(s, h, key, now, cost, func(p *params, w uint64, now int64) (uint64, bool) {
		next, fwait, fok := p.g.reserve(w, now, cost, maxWait)
		wait, ok, end = fwait, fok, tat(next)
		return next, fok
	})
	if sl == nil { // refused on a new key, or SetPolicy lowered the limit below cost meanwhile
		s.mu.Unlock()
		if !decided {
			wait = int64(Never)
		}
		l.tally.count(false)
		return wait, a, false
	}
	if !decided {
		wait, end, ok, _ = reserveAt(s.tab.Load().p, &sl.word, now, cost, maxWait)
	}
	if ok {
		a = s.tab.Load().p.admitted(s.incarnation(sl), now, end, cost)
	}
	// Refused, an entry found here existed before this reservation, which
	// changed nothing: it stays, as after any denial.
	s.mu.Unlock()
	l.tally.count(ok)
	return wait, a, ok
}

// reserveAt runs reserve's CAS loop; live is false if the word is retired.
// end is the TAT the reservation left. A cost above the policy's limit
// (lowered by SetPolicy) never fits.
func reserveAt(p *params, w *atomic.Uint64, now, cost, maxWait int64) (wait, end int64, ok, live bool) {
	if cost > p.limit {
		return int64(Never), 0, false, true
	}
	for {
		old := w.Load()
		if old&deadBit != 0 {
			return 0, 0, false, false
		}
		next, wait, ok := p.g.reserve(old, now, cost, maxWait)
		if !ok {
			return wait, 0, false, true
		}
		if next == old || w.CompareAndSwap(old, next) {
			return wait, tat(next), true, true
		}
	}
}
