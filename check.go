package hotlimit

// Check reports what AllowN(key, cost) would decide now, without
// consuming anything, counting a decision in Stats, creating an entry or
// calling the deny hook: Allowed is whether it would admit the request;
// RetryAfter, when it would not, is the shortest wait after which it
// would (Never for a cost below 0 or above Limit); Remaining and
// ResetAfter are those of the key's current state; Delay is the
// LeakyBucket's Delay the admission would have.
//
// Other requests and time change the answer between Check and a later
// AllowN: use Check to report and to plan (what a client may send next,
// when a limit frees a unit), never to decide. With Remaining r below
// Limit, Check(key, r+1).RetryAfter is how long r stays the most the key
// can spend: the time until the next unit comes back.
func (l *Limiter) Check(key string, cost int64) Decision {
	return l.withDelay(l.check(key, cost), cost)
}

// withDelay returns d, a check of cost, with the Delay an admission of
// cost would have: for the leaky bucket, the debt it would wait out,
// which is the current state's ResetAfter; 0 otherwise.
func (l *Limiter) withDelay(d Decision, cost int64) Decision {
	d.Delay = 0
	if d.Allowed && cost > 0 && l.kind == kindLeakyBucket {
		d.Delay = d.ResetAfter
	}
	return d
}
