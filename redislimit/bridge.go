package redislimit

import (
	"context"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/redislimit/internal/bridge"
	"github.com/hotlimit/hotlimit/redislimit/internal/luasrc"
)

// The calls redislimit/lease makes through a Limiter (see
// internal/bridge).
func init() {
	bridge.NewScript = func(src string) any { return newScript(luasrc.Start + luasrc.Incarnation + src) }
	bridge.Call = func(ctx context.Context, l any, script any, key string, args ...any) ([]int64, error) {
		lim := l.(*Limiter)
		return lim.callQuiet(ctx, script.(*luaScript), []string{lim.RedisKey(key), lim.incKey(key)}, args...)
	}
	bridge.ModeOption = func(build func(l any, policy hotlimit.Policy) (bridge.Leaser, error)) any {
		return Option(func(c *config) { c.leaser = build })
	}
	bridge.Fail = func(l any, key string, cost int64, err error) hotlimit.Decision {
		lim := l.(*Limiter)
		d, _ := failDecision([]Layer{{Limiter: lim, Key: key, Cost: cost}}, lim.rt.addr)
		if h := lim.hooks; h != nil && h.Failure != nil {
			h.Failure(lim.name, d, err)
		}
		return d
	}
}
