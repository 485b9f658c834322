package lease

import (
	"context"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/hotlimit/hotlimit/redislimit/internal/bridge"
)

// Mode returns a redislimit.Option that puts a redislimit.Limiter in
// lease mode: its AllowN, Allow and AllowLayers (and so a RedisBackend
// built with it, behind httplimit or grpclimit) decide from leases, as a
// lease Limiter's Decide does, while everything else is the Limiter's own:
// its key layout, timeout, breaker, hooks and failure policy, given as
// redislimit options beside Mode. opts may set WithMaxLease, WithPeriod,
// WithClock and WithTimeout, which bounds the leases' takes (default
// 100ms) on top of the Limiter's own WithTimeout: give both to raise it.
// The others have no effect in this mode, where the Limiter's options
// apply. The policy must be a hotlimit.TokenBucket or
// FixedWindow (redislimit.New returns the error otherwise).
//
// A layered call decides every layer from its lease, all or nothing: the
// units of the layers admitted before a refusal go back into their leases.
// Its limiters must all be in lease mode (else redislimit.ErrMixedModes).
// redislimit's Limiter.SweepLeases (and RedisBackend.SweepLeases) gives
// back idle keys' leases, as Limiter.Sweep here does: call it
// periodically. Its Close gives back what the leases hold, as
// Limiter.Close here does; the limiter refuses later requests.
func Mode(opts ...Option) redislimit.Option {
	return bridge.ModeOption(func(l any, policy hotlimit.Policy) (bridge.Leaser, error) {
		cfg, err := configure(opts)
		if err != nil {
			return nil, err
		}
		ll, err := newOn(l.(*redislimit.Limiter), policy, cfg)
		if err != nil {
			return nil, err
		}
		if modeBuilt != nil {
			modeBuilt(ll)
		}
		return modeLeaser{ll}, nil
	}).(redislimit.Option)
}

// modeBuilt, when set, sees every Limiter Mode builds. Only this
// package's tests set it.
var modeBuilt func(*Limiter)

// modeLeaser is a Limiter as a redislimit.Limiter's lease mode sees it.
type modeLeaser struct{ l *Limiter }

func (m modeLeaser) Decide(ctx context.Context, key string, cost int64, undo bool) (hotlimit.Decision, func(), error) {
	d, g, err := m.l.decide(ctx, key, cost)
	if !undo || g == nil || err != nil || !d.Allowed {
		return d, nil, err
	}
	return d, func() { g.avail.Add(cost) }, nil
}

func (m modeLeaser) Sweep(ctx context.Context) error { return m.l.Sweep(ctx) }

func (m modeLeaser) Close(ctx context.Context) error { return m.l.Close(ctx) }
