package bench

import (
	"math"
	"time"

	"github.com/hotlimit/hotlimit"
)

// hotlimit's own variants, listed right after the baseline. Both run with
// the sweeper off (WithSweepInterval(0)), unbounded keys (the default) and
// the default number of shards; "-coarse" reads a 1 ms cached clock.
func init() {
	extraImpls = append(extraImpls,
		impl{name: "hotlimit", make: newHotlimit(false), keyedOK: true, canDeny: true},
		impl{name: "hotlimit-coarse", make: newHotlimit(true), keyedOK: true, canDeny: true},
	)
}

// hotlimitRate maps a float rate per second onto hotlimit.Rate, whose N is
// an integer: N per second when the rate is at least 1/s, else 1 per
// 1/rate seconds (so 1/3600 per second is exactly 1 per hour).
func hotlimitRate(perSec float64) hotlimit.Rate {
	if perSec >= 1 {
		return hotlimit.Rate{N: int64(math.Round(perSec)), Per: time.Second}
	}
	return hotlimit.Rate{N: 1, Per: durationOf(float64(time.Second) / perSec)}
}

type hotlimitKeyed struct{ l *hotlimit.Limiter }

func (h hotlimitKeyed) Allow(key string) bool { return h.l.Allow(key).Allowed }

func newHotlimit(coarse bool) func(p policy) (keyed, func()) {
	return func(p policy) (keyed, func()) {
		opts := []hotlimit.Option{hotlimit.WithSweepInterval(0)}
		if coarse {
			opts = append(opts, hotlimit.WithCoarseClock(time.Millisecond))
		}
		l, err := hotlimit.New(hotlimit.TokenBucket{
			Rate:  hotlimitRate(p.Rate),
			Burst: int64(p.Burst),
		}, opts...)
		if err != nil {
			panic(err)
		}
		return hotlimitKeyed{l: l}, func() { _ = l.Close() }
	}
}
