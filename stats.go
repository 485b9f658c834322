package hotlimit

// Len returns the number of keys currently held (counting insertions in
// flight).
func (l *Limiter) Len() int { return int(l.keys.Load()) }

// Stats are a limiter's counters since New.
type Stats struct {
	Allowed uint64 // admitted requests (including peeks)
	Denied  uint64 // denied requests
	Keys    uint64 // keys currently held: Len()
	Swept   uint64 // fresh entries removed (by the sweeper or to make room)
	Evicted uint64 // non-fresh entries evicted to make room (WithMaxKeys)
}

// Stats returns the limiter's counters. Each is read atomically; together
// they are not a snapshot of one instant.
func (l *Limiter) Stats() Stats {
	var st Stats
	for i := range l.shards {
		s := &l.shards[i]
		st.Swept += s.swept.Load()
		st.Evicted += s.evicted.Load()
	}
	st.Allowed, st.Denied = l.tally.sums()
	st.Keys = uint64(max(0, l.keys.Load()))
	return st
}
