package hotlimit

import (
	"fmt"
	"time"
)

// Policy returns the limiter's current policy, as given to New or
// SetPolicy (a pointer given there is returned dereferenced).
func (l *Limiter) Policy() Policy { return l.p.Load().policy }

// Limit returns the current policy's capacity: Burst, Limit, or
// Capacity+1 for the leaky bucket. It is a number of units, the most one
// request may cost, not a rate as golang.org/x/time/rate's Limit is.
func (l *Limiter) Limit() int64 { return l.p.Load().limit }

// SetPolicy changes the limiter's policy while it serves traffic, keeping
// every key's state. The new policy must use the same algorithm (a token
// bucket stays a token bucket); to change algorithm, create a new Limiter.
// It returns an error naming the field, as New does, and then changes
// nothing.
//
// How existing keys carry over:
//
//   - TokenBucket, LeakyBucket: a key's theoretical arrival time is kept,
//     so its debt (how long until its bucket is full again) is kept as
//     time. A key that has used a fraction of its bucket has used the same
//     fraction of the new one when the bucket's length in time (Burst·T)
//     is unchanged. When the bucket shrinks below a key's debt, that key is
//     denied until its debt drains into the new bucket: a change never
//     hands out a fresh bucket, and the wait is at most the key's old debt.
//     When the bucket grows, the room is there at once.
//   - FixedWindow, SlidingWindow: a key's counts carry over into the
//     window that holds the instant of the change (with an unchanged
//     Window, the same window). A key whose count is at or above the new
//     Limit is denied until its window turns. The packed count fields keep
//     the width of the largest Limit the limiter has had, so lowering a
//     Limit and raising it again loses no count. (Only where that width
//     would leave too few bits for the window index, the new Limit's width
//     is used and a larger count is stored as the field's maximum, which
//     is at least the new Limit.)
//   - SlidingLog: the admitted instants a key holds at the change carry
//     over and count against the new Limit and Window: a key holding more
//     instants than the new Limit is denied until enough of them expire. A
//     longer Window counts only the instants that still counted under the
//     old one at the change; it never revives expired ones.
//
// The change is made shard by shard under each shard's mutex: once
// SetPolicy returns every decision uses the new policy, and while it runs
// a decision uses either the old policy or the new one, each on state in
// that policy's format. A give-back of an admission made before the change
// gives back at most what that admission took: for the buckets, the time
// it added to the key's TAT at the old rate (the part not drained since);
// for the windows, its count as before if the Window is unchanged, and
// nothing if it changed, since the counts then moved into a window of the
// new length, merged with other windows' counts.
//
// SetPolicy costs time proportional to the number of keys held, and the
// insertion of a new key into a shard waits while that shard is converted.
// Decisions on existing keys never wait.
func (l *Limiter) SetPolicy(policy Policy) error {
	np, err := newParams(policy)
	if err != nil {
		return err
	}
	if np.kind != l.kind {
		return fmt.Errorf("hotlimit: SetPolicy: a %v limiter cannot take a %v policy; create a new Limiter to change algorithm", l.kind, np.kind)
	}
	l.setMu.Lock()
	defer l.setMu.Unlock()
	if old := l.p.Load(); np.kind.isWindow() {
		// Never narrow the count fields: a count the old policy admitted
		// must survive a lower limit and a raise back (see above).
		if x, ok := newWindowBits(np.limit, time.Duration(np.win.length), np.win.sliding, max(np.win.cb, old.win.cb)); ok && x.horizon() >= minHorizon {
			np.win = x
		}
		// A new window length merges each key's counts into the new
		// window holding the change's instant, and a narrower count field
		// clamps them: either way no count is an earlier admission's own
		// any more, and its give-back gives nothing (refund.go).
		np.epoch = old.epoch
		if np.win.length != old.win.length || np.win.cb < old.win.cb {
			np.epoch++
		}
	}
	l.p.Store(np)
	if l.isSlidingLog() {
		for i := range l.logs {
			ls := &l.logs[i]
			ls.mu.Lock()
			// Drop what no longer counts under the old window, so that a
			// longer new one cannot revive it. Rings grow on their next
			// admission if Limit grew.
			now := l.now()
			for _, r := range ls.m {
				at := max(now, r.last)
				r.expire(r.live(at, ls.p.logW))
				r.last = at
			}
			ls.p = np
			ls.mu.Unlock()
		}
		return nil
	}
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		t := s.tab.Load()
		var convert func(uint64) uint64
		if np.kind.isWindow() {
			// Read under the mutex: no state being converted is newer
			// than a decision this reading could make (see gc.go); the
			// conversion is a rebuild (shard.go, protocol step 8).
			convert = convertWindow(&t.p.win, &np.win, l.now())
		}
		// Buckets keep their TAT and concurrency limiters their count:
		// the words need no conversion, but the table must change so that
		// every decision reads the policy from the table it probes.
		l.publish(s, t.converted(len(t.slots), 0, np, convert))
		s.mu.Unlock()
	}
	return nil
}

// convertWindow returns the conversion of window words from layout o to
// layout n at instant now: the counts, as o reads them at now, move into
// the window of n holding the instant o decides at (never before the
// stored window: see window.go). A word with no counts keeps that window
// too, so that no stale reading can be decided before it.
func convertWindow(o, n *window, now int64) func(uint64) uint64 {
	return func(w uint64) uint64 {
		k, e, p, q := o.view(w, now)
		if !n.sliding {
			p = 0
		}
		at := int64(k)*o.length + e
		return n.pack(uint64(at/n.length), min(p, int64(n.cmask)), min(q, int64(n.cmask)))
	}
}
