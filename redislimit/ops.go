package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/redis/go-redis/v9"
)

// Reset makes key fresh: it deletes the key's state in Redis, for every
// instance, and this instance's cached denial of key (other instances'
// cached denials stay until their RetryAfter; see ForgetDenials). One
// round trip; an error wraps ErrUnavailable.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if len(key) > hotlimit.MaxKeyLen {
		return hotlimit.ErrKeyTooLong
	}
	if l.cache != nil {
		l.cache.del(key)
	}
	_, err := l.op(ctx, "reset", key, 0)
	return err
}

// Wait blocks until a request of cost for key is admitted, or returns an
// error, as hotlimit's Limiter.Wait does.
//
// For the token and leaky buckets, Wait reserves the request's slot at
// once in Redis (consuming it) and sleeps until the slot: the instant the
// request fits for the token bucket, the start of its turn for the leaky
// bucket. If the context's deadline is before the slot, Wait fails at once
// with an error wrapping hotlimit.ErrDeadline, consuming nothing; if the
// context ends while it sleeps, it gives the slot back, as
// Admission.Refund does (only what the key's state still owes the
// reservation), and returns the context's error. For the window policies and the sliding
// log, which cannot hold a reservation in a future window, Wait sleeps
// until RetryAfter and tries again, so it is not first-come first-served
// under contention.
//
// It returns hotlimit.ErrInvalidCost for a cost below 0 or above Limit,
// and hotlimit.ErrKeyTooLong. When Redis cannot decide, the failure policy
// answers: with WithFailOpen it returns nil, with WithFallbackLocal it
// waits on its in-process limiter, and by default (fail closed) it
// returns the error (which wraps ErrUnavailable).
func (l *Limiter) Wait(ctx context.Context, key string, cost int64) error {
	if cost < 0 || cost > l.spec.limit {
		return fmt.Errorf("%w: cost %d, limit %d", hotlimit.ErrInvalidCost, cost, l.spec.limit)
	}
	if len(key) > hotlimit.MaxKeyLen {
		return hotlimit.ErrKeyTooLong
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if cost == 0 {
		return nil
	}
	if l.spec.kind != kindTokenBucket {
		return l.waitWindow(ctx, key, cost)
	}
	maxWait := int64(maxMicros)
	if dl, ok := ctx.Deadline(); ok {
		maxWait = int64(time.Until(dl) / time.Microsecond)
	}
	r, err := l.op(ctx, "reserve", key, cost, maxWait)
	if err != nil {
		return l.waitFailed(ctx, key, cost, err)
	}
	if len(r) < 2 || r[0] == 1 && len(r) != 4 {
		return fmt.Errorf("%w: redislimit: unexpected reply %v", ErrUnavailable, r)
	}
	wait := micros(r[1])
	if r[0] != 1 {
		return fmt.Errorf("%w: would wait %v", hotlimit.ErrDeadline, wait)
	}
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		t.Stop()
		// Give the slot back, on a context of its own: the caller's has
		// ended. The reservation is an admission of this incarnation that
		// left the TAT r[3]: the give-back returns only what the state
		// still owes it.
		a := Admission{l: l, key: key, inc: r[2], mark: r[3], cost: cost}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
		a.Refund(rctx)
		cancel()
		return ctx.Err()
	}
}

func (l *Limiter) waitWindow(ctx context.Context, key string, cost int64) error {
	for {
		d, err := l.AllowN(ctx, key, cost)
		if err != nil {
			return l.waitFailed(ctx, key, cost, err)
		}
		if d.Allowed {
			return nil
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d.RetryAfter {
			return fmt.Errorf("%w: would wait %v", hotlimit.ErrDeadline, d.RetryAfter)
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

// waitFailed applies the failure policy to a Wait that Redis could not
// decide.
func (l *Limiter) waitFailed(ctx context.Context, key string, cost int64, err error) error {
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return ctx.Err()
	}
	switch l.fail.mode {
	case failOpen:
		return nil
	case failFallbackLocal:
		return l.local.Wait(ctx, key, cost)
	}
	return err
}

// op runs one operation of ops.lua on key (see call1), with the
// arguments after cost: maxWait, or an admission's incarnation and mark.
func (l *Limiter) op(ctx context.Context, name, key string, cost int64, more ...any) ([]int64, error) {
	now := ""
	if l.testNow != nil {
		now = strconv.FormatInt(l.testNow(), 10)
	}
	leaky := "0"
	if l.spec.leaky {
		leaky = "1"
	}
	rkey := l.RedisKey(key)
	args := append([]any{now, name, l.argv[0], l.argv[1], l.argv[2], l.argv[3], leaky, cost}, more...)
	return l.call1(ctx, opsScript, []string{rkey, l.incKey(key)}, args...)
}

// call1 runs s on the Redis keys (all in keys[0]'s slot) with args, through the limiter's
// router, its node's circuit and the hooks, and returns the reply's
// integers. An error wraps ErrUnavailable and its cause, and is reported
// to the Failure hook.
func (l *Limiter) call1(ctx context.Context, s *luaScript, keys []string, args ...any) ([]int64, error) {
	out, err := l.callQuiet(ctx, s, keys, args...)
	if err != nil && l.hooks != nil && l.hooks.Failure != nil {
		l.hooks.Failure(l.name, hotlimit.Decision{}, err)
	}
	return out, err
}

// callQuiet is call1 that leaves the error's report to the Failure hook
// to its caller (which knows the Decision the failure policy made).
func (l *Limiter) callQuiet(ctx context.Context, s *luaScript, keys []string, args ...any) ([]int64, error) {
	fail := func(cause error) ([]int64, error) {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, cause)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	cctx, cancel := bounded(ctx, l.timeout)
	if cancel != nil {
		defer cancel()
	}
	client, node, err := l.rt.route(cctx, l.client, keys[0])
	if err != nil {
		reportCall(l.hooks, "", 0, err)
		return fail(err)
	}
	c := l.circuit(node)
	ok, t := c.acquire(l.hooks)
	if !ok {
		return fail(ErrCircuitOpen)
	}
	vals, err := l.rt.send(cctx, s, client, node, l.hooks, keys, args)
	settle(ctx, c, t, err, l.hooks)
	if err != nil {
		return fail(err)
	}
	out := make([]int64, 0, len(vals))
	for _, v := range vals {
		n, ok := v.(int64)
		if !ok {
			return fail(fmt.Errorf("redislimit: unexpected script reply %v", vals))
		}
		out = append(out, n)
	}
	return out, nil
}

// settle records in c the outcome err of a call it let through (with the
// ticket acquire gave), made for a caller whose context is ctx, and reports
// whether the call counted as a failure of the node.
//
// A reply error comes from a live server, a cancellation from the caller,
// and a call that left the batcher's queue unsent (errNotSent) never
// reached the node: none of them says the node is down. A caller's
// deadline that passes once the call was sent does count: the node did not
// answer in the time it was given, and a hung node must open its circuit
// even when every caller's deadline is shorter than WithTimeout.
func settle(ctx context.Context, c *circuit, t ticket, err error, h *Hooks) (failed bool) {
	switch {
	case err == nil || isReplyError(err):
		c.done(t, true, h)
	case errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, errNotSent):
		c.release(t, h)
	default:
		c.done(t, false, h)
		return true
	}
	return false
}

// isReplyError reports whether err is, or wraps, a reply error of Redis
// (redis.Error). Its target escapes to the heap (errors.As): in a
// function of its own, it is allocated only when there is an error to
// look at.
func isReplyError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}
