// Package testhook lets tests outside the root package mark instants
// inside a Limiter's operations that no result shows. Only tests set
// these hooks; unset, each costs one atomic load, on a path that takes
// mutexes anyway and that no decision on an existing key reaches.
package testhook

import "sync/atomic"

// Evicted, when set, is called by the goroutine of an insertion under
// WithMaxKeys that has just evicted an entry of a keyed table to make room
// for its key (keys.go, reserveKey): after the eviction's retiring CAS and
// the release of the victim's shard mutex, before the insertion takes its
// own shard's mutex again to decide on the new key. Between the two, other
// requests run: the eviction and the decision are two steps, not one.
// Evictions by the sliding log do not call it.
var Evicted atomic.Pointer[func()]
