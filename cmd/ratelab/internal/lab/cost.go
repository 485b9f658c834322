package lab

import (
	"fmt"
	"runtime"
	"time"

	"github.com/hotlimit/hotlimit"
)

// Cost is what one algorithm's state and decisions cost on this machine.
type Cost struct {
	Algo          string
	NA            string  // why it was not measured, if it was not
	BytesPerKey   float64 // heap growth per key
	NsPerDecision float64 // wall time per AllowN
	Keys          int     // keys the measurement used
	Fill          int64   // unit requests sent to each key before measuring
	Decisions     int     // AllowN calls timed
}

// MeasureCost measures a's state bytes per key, as the heap growth
// (settledHeap: runtime.ReadMemStats once garbage collection has settled)
// from sending min(Limit, 100) unit requests to each of keys keys at one
// instant, and its ns per decision,
// as a timed loop of decisions calls cycling over those keys while the
// manual clock advances one emission interval per key per round (so the
// mix of admissions and denials is that of a key at its rate). Results vary
// from run to run. It runs the GC, so call it outside any timed region.
func MeasureCost(a Algorithm, policy Policy, keys, decisions int) (Cost, error) {
	c := Cost{Algo: a.Name, NA: a.NA, Keys: keys, Fill: min(policy.Limit, 100), Decisions: decisions}
	if a.NA != "" {
		return c, nil
	}
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("key-%08d", i)
	}
	clk := hotlimit.NewManualClock()
	lim, err := newDecider(a.Policy, clk, 0)
	if err != nil {
		return c, fmt.Errorf("%s: %w", a.Name, err)
	}
	defer lim.Close()
	before := settledHeap()
	for _, k := range names {
		for range c.Fill {
			lim.AllowN(k, 1)
		}
	}
	after := settledHeap()
	c.BytesPerKey = float64(int64(after)-int64(before)) / float64(keys)

	step := max(policy.Interval()/time.Duration(keys), 1)
	start := time.Now()
	for i := range decisions {
		clk.Advance(step)
		lim.AllowN(names[i%keys], 1)
	}
	c.NsPerDecision = float64(time.Since(start).Nanoseconds()) / float64(max(decisions, 1))
	runtime.KeepAlive(lim)
	return c, nil
}

// settledHeap runs the garbage collector until the heap stops shrinking
// (at most 5 cycles) and returns the bytes of live heap objects. One cycle
// is not enough: some garbage survives it (here about 32 KB after
// Algorithms built and closed its limiters), and a measurement that
// started after one cycle counted that garbage's release against the keys
// it measured: 2000 token-bucket keys came out at −0.6 bytes each, not 17.
func settledHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	for range 4 {
		prev := m.HeapAlloc
		runtime.GC()
		runtime.ReadMemStats(&m)
		if m.HeapAlloc >= prev {
			break
		}
	}
	return m.HeapAlloc
}
