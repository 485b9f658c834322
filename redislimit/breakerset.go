package redislimit

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// acquireBreakers appends the distinct breakers of layers (usually one,
// shared) to bs and acquires each, appending to probes whether the call is
// that breaker's half-open probe. If one refuses, it releases those it had
// acquired and reports false; otherwise the call must be settled with
// settleBreakers.
func acquireBreakers(layers []Layer, bs []*Breaker, probes []bool) ([]*Breaker, []bool, bool) {
	for _, ly := range layers {
		if !containsBreaker(bs, ly.Limiter.breaker) {
			bs = append(bs, ly.Limiter.breaker)
		}
	}
	for i, b := range bs {
		ok, probe := b.acquire()
		if !ok {
			for j, a := range bs[:i] {
				a.release(probes[j])
			}
			return bs, probes, false
		}
		probes = append(probes, probe)
	}
	return bs, probes, true
}

// settleBreakers records in each acquired breaker the outcome err of the
// call made under ctx.
//
// A reply error comes from a live server, and a cancellation from the
// caller: neither says Redis is down. A caller's deadline that passes does
// count: Redis did not answer in the time it was given, and a hung Redis
// must open the breaker even when every caller's deadline is shorter than
// WithTimeout.
func settleBreakers(ctx context.Context, bs []*Breaker, probes []bool, err error) {
	var rerr redis.Error
	live := err == nil || errors.As(err, &rerr)
	canceled := !live && errors.Is(ctx.Err(), context.Canceled)
	for i, b := range bs {
		switch {
		case live:
			b.done(true)
		case canceled:
			b.release(probes[i])
		default:
			b.done(false)
		}
	}
}

func containsBreaker(bs []*Breaker, b *Breaker) bool {
	for _, x := range bs {
		if x == b {
			return true
		}
	}
	return false
}
