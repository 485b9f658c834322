package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hotlimit/hotlimit"
)

// Layer is one limit of a layered check: a limiter, the key it limits the
// request by, and the request's cost there. See AllowLayers.
type Layer struct {
	Limiter *Limiter
	Key     string
	Cost    int64
}

// ErrMixedClients is returned by AllowLayers for layers whose limiters do
// not share one client: one script cannot span two servers.
var ErrMixedClients = errors.New("redislimit: the layers' limiters use different clients")

// AllowLayers admits a request only if every layer admits it, all or
// nothing, in one script call: either every layer consumes its cost or
// none does. Unlike hotlimit.AllowLayers nothing is consumed even for an
// instant, since the script decides every layer before it writes. The
// Decision is that of hotlimit.AllowLayers: it reports the binding
// layer's Remaining and Limit and the largest ResetAfter. Allowed, the
// binding layer is the one with the fewest requests of its cost left
// (⌊Remaining/Cost⌋, ties to the smaller Remaining); denied, it is the
// one with the largest RetryAfter among the layers that deny, each layer
// checked on its state as it was. A layer with a nil Limiter, or a key
// longer than hotlimit.MaxKeyLen, denies with RetryAfter = Never without
// a call.
//
// Every limiter must use the same client (else ErrMixedClients). The call
// takes the smallest of their timeouts and goes through each of their
// breakers. When Redis does not decide, each layer's FailurePolicy
// applies: a FailClosed layer denies the request; otherwise the layers
// with a Fallback decide locally, and FailOpen layers are skipped; the
// error wraps ErrUnavailable and the cause. On a Redis Cluster the keys
// must share a slot: see WithHashTag.
func AllowLayers(ctx context.Context, layers ...Layer) (hotlimit.Decision, error) {
	d, _, err := AllowLayersIndex(ctx, layers...)
	return d, err
}

// AllowLayersIndex is AllowLayers that also returns the index of the
// binding layer, the one whose Limit and Remaining the Decision reports,
// as hotlimit.AllowLayersIndex does: -1 for no layers or mixed clients.
// When Redis does not decide, it is the FailClosed layer that denied, the
// binding layer among the fallbacks, or 0 when only FailOpen layers were
// left.
func AllowLayersIndex(ctx context.Context, layers ...Layer) (hotlimit.Decision, int, error) {
	if len(layers) == 0 {
		return hotlimit.Decision{Allowed: true}, -1, nil
	}
	first := layers[0].Limiter
	timeout := time.Duration(0)
	for i, ly := range layers {
		if ly.Limiter == nil {
			return hotlimit.Decision{RetryAfter: hotlimit.Never}, i, nil
		}
		if len(ly.Key) > hotlimit.MaxKeyLen {
			return hotlimit.Decision{Limit: ly.Limiter.spec.limit, RetryAfter: hotlimit.Never}, i, nil
		}
		if ly.Limiter.client != first.client {
			return hotlimit.Decision{RetryAfter: hotlimit.Never}, -1, ErrMixedClients
		}
		if i == 0 || ly.Limiter.timeout < timeout {
			timeout = ly.Limiter.timeout
		}
	}
	if d, i, ok := localDenial(layers); ok {
		return d, i, nil
	}

	var bbuf [4]*Breaker
	var pbuf [4]bool
	bs, probes, ok := acquireBreakers(layers, bbuf[:0], pbuf[:0])
	if !ok {
		d, i := failDecision(layers)
		return d, i, fmt.Errorf("%w: %w", ErrUnavailable, ErrCircuitOpen)
	}
	var rbuf [2 + 4*8]int64
	reply, err := run(ctx, timeout, layers, rbuf[:0])
	settleBreakers(ctx, bs, probes, err)
	if err != nil {
		d, i := failDecision(layers)
		return d, i, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	d, denied, binding, err := decode(reply, layers)
	if err != nil {
		d, i := failDecision(layers)
		return d, i, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if denied >= 0 {
		remember(layers, denied, d, reply)
	}
	return d, binding, nil
}

// run makes the one script call for layers and appends the reply's
// integers to out.
//
// The slices handed to go-redis escape to the heap whatever their size:
// they are made to measure rather than from arrays on the stack, which
// would move to the heap whole.
func run(ctx context.Context, timeout time.Duration, layers []Layer, out []int64) ([]int64, error) {
	keys, args := make([]string, 0, len(layers)), make([]any, 0, 1+5*len(layers))
	if l := layers[0].Limiter; l.testNow != nil {
		args = append(args, strconv.FormatInt(l.testNow(), 10))
	} else {
		args = append(args, "")
	}
	for _, ly := range layers {
		l := ly.Limiter
		keys = append(keys, l.RedisKey(ly.Key))
		args = append(args, l.argv[0], l.argv[1], l.argv[2], l.argv[3], ly.Cost)
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > timeout {
		// Otherwise the caller's deadline comes first: it bounds the
		// call, without a timer of our own.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	vals, err := script.Run(ctx, layers[0].Limiter.client, keys, args...).Slice()
	if err != nil {
		return nil, err
	}
	for _, v := range vals {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("redislimit: unexpected script reply %v", vals)
		}
		out = append(out, n)
	}
	return out, nil
}
