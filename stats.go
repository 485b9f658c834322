package hotlimit

// Len returns the number of keys currently held (counting insertions in
// flight).
func (l *Limiter) Len() int { return int(l.keys.Load()) }

// Stats are a limiter's counters since New. Every field but Keys is a
// counter: it never decreases, so a monitoring system may read it as one
// (a decrease would look like a restart).
//
// Allowed and Denied count decisions as they were made: each call of
// AllowN (or Allow, AllowNBytes, a layer of AllowLayers, a reservation of
// Wait, an attempt of a ConcurrencyLimiter) adds one to exactly one of
// them. Refunded counts admissions given back later that found the entry
// they were made on (a bucket's entry renewed since by a give-back below
// them only while the entry still traces them: docs/semantics.md,
// "Give-backs"): a layer that AllowLayers undid because a later layer
// denied, an Admission's Refund, a Wait whose context ended while it
// slept. An admission that is given back stays in Allowed, so Allowed −
// Refunded is the number of admissions that stood, and Denied + Refunded
// the number of requests this limiter counted that did not get through.
type Stats struct {
	Allowed  uint64 // admissions decided (including peeks), given back or not
	Denied   uint64 // denials decided
	Keys     uint64 // keys currently held: Len(); a gauge, not a counter
	Swept    uint64 // fresh entries removed (by the sweeper, to make room, or when a refund left one fresh)
	Evicted  uint64 // non-fresh entries evicted to make room (WithMaxKeys)
	Refunded uint64 // admissions given back (AllowLayers, Admission.Refund, Wait)
}

// Stats returns the limiter's counters. Each is read atomically, and a
// later call never returns a smaller counter; together they are not a
// snapshot of one instant.
func (l *Limiter) Stats() Stats {
	var st Stats
	for i := range l.shards {
		s := &l.shards[i]
		st.Swept += s.swept.Load()
		st.Evicted += s.evicted.Load()
	}
	st.Allowed, st.Denied, st.Refunded = l.tally.sums()
	st.Keys = uint64(max(0, l.keys.Load()))
	return st
}
