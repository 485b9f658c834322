package redislimit

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hotlimit/hotlimit"
)

// requests is how many more requests of cost fit in remaining units, as
// hotlimit.AllowLayers counts them to find the binding layer.
func requests(remaining, cost int64) int64 {
	if cost <= 0 {
		return math.MaxInt64
	}
	return remaining / cost
}

// micros converts a duration in µs from the script, -1 meaning never.
func micros(us int64) time.Duration {
	if us < 0 {
		return hotlimit.Never
	}
	return time.Duration(us) * time.Microsecond
}

// decode builds the Decision from the script's reply (see script.lua).
// denied is the index of the denying layer, or -1; binding that of the
// layer the Decision reports. When states is not nil, the reply carries
// each layer's next unit back (run's next), and decode sets states[i] to
// layer i's Remaining in the reply and that wait: for an admitted call,
// the layer's state after its admission; for a denied one, the denying
// layer's state as it decided and every other layer's as it was.
func decode(r []int64, layers []Layer, states []hotlimit.LayerState) (d hotlimit.Decision, denied, binding int, err error) {
	extra := 0 // the next unit's value per layer, when asked for
	if states != nil {
		extra = 1
	}
	if a := 2 + extra; len(r) == 1+a*len(layers) && r[0] == 1 {
		d, binding := decodeAdmitted(r, a, layers, states)
		return d, -1, binding, nil
	}
	return decodeDenied(r, 4+extra, layers, states)
}

// decodeAdmitted is decode of an admitted call's reply, a values per
// layer: its Decision and its binding layer.
func decodeAdmitted(r []int64, a int, layers []Layer, states []hotlimit.LayerState) (d hotlimit.Decision, binding int) {
	var best int64 // the binding layer's requests(Remaining, Cost)
	for i, ly := range layers {
		rem, reset := r[1+a*i], micros(r[2+a*i])
		if states != nil {
			states[i] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: rem}, Next: micros(r[3+a*i])}
		}
		if k := requests(rem, ly.Cost); i == 0 || k < best || k == best && rem < d.Remaining {
			best, d.Remaining, d.Limit, binding = k, rem, ly.Limiter.spec.limit, i
		}
		d.ResetAfter = max(d.ResetAfter, reset)
		if sp := &ly.Limiter.spec; sp.leaky && ly.Cost > 0 {
			// The leaky bucket's Delay: the debt before the
			// admission, reset − cost·T.
			d.Delay = max(d.Delay, reset-time.Duration(ly.Cost*sp.a)*time.Microsecond)
		}
	}
	d.Allowed = true
	return d, binding
}

// decodeDenied is decode of a denied call's reply, a values per layer
// (or of a reply that is neither: an error).
func decodeDenied(r []int64, a int, layers []Layer, states []hotlimit.LayerState) (d hotlimit.Decision, denied, binding int, err error) {
	n := len(layers)
	if len(r) != 2+a*n || r[0] != 0 || r[1] < 1 || r[1] > int64(n) {
		return d, -1, -1, fmt.Errorf("redislimit: unexpected script reply %v", slices.Clone(r)) // a copy: r stays on the caller's stack
	}
	at := func(j int) (ok bool, rem int64, retry, reset time.Duration) {
		o := 2 + a*j
		return r[o] == 1, r[o+1], micros(r[o+2]), micros(r[o+3])
	}
	for j := range states {
		o := 2 + a*j
		states[j] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: r[o+1]}, Next: micros(r[o+4])}
	}
	i := int(r[1] - 1)
	_, rem, retry, reset := at(i)
	d = hotlimit.Decision{Limit: layers[i].Limiter.spec.limit, Remaining: rem, RetryAfter: retry, ResetAfter: reset}
	binding = i
	for j := range layers {
		if j == i {
			continue
		}
		ok, rem, retry, reset := at(j)
		if !ok && retry > d.RetryAfter {
			d.RetryAfter, d.Limit, d.Remaining, binding = retry, layers[j].Limiter.spec.limit, rem, j
		}
		d.ResetAfter = max(d.ResetAfter, reset)
	}
	return d, i, binding, nil
}
