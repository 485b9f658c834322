package redislimit

import (
	"fmt"
	"strings"
	"time"
)

// Option configures a Limiter.
type Option func(*config)

type config struct {
	prefix   string
	tag      *string
	timeout  time.Duration
	breaker  *Breaker
	fail     failurePolicy
	failSet  bool
	denyKeys int
	hooks    *Hooks
	leases   bool // WithLeases
	maxLease int64
	period   time.Duration
	err      error
}

func (c *config) failf(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("redislimit: "+format, args...)
	}
}

// The start of every Redis key and the bound of every call to Redis,
// unless WithPrefix and WithTimeout say otherwise.
const (
	defaultPrefix  = "hotlimit:"
	defaultTimeout = 100 * time.Millisecond
)

// WithPrefix sets the start of every Redis key (default "hotlimit:").
// It must not contain a brace: on a Redis Cluster a brace in the prefix
// would decide the keys' slots; WithHashTag does that on purpose.
func WithPrefix(prefix string) Option {
	return func(c *config) {
		if strings.ContainsAny(prefix, "{}") {
			c.failf("WithPrefix: prefix %q contains a brace (use WithHashTag to choose a slot)", prefix)
		}
		c.prefix = prefix
	}
}

// WithHashTag puts every key of the limiter in the Redis Cluster slot of
// tag: keys become prefix + "{" + tag + "}" + name + ":{" + key + "}"
// (Redis hashes only the first braces' content, the tag). Give the
// same tag to every limiter that takes part in one AllowLayers call on a
// cluster, since a script's keys must share a slot; this puts all of their
// keys on one node. Without it, keys are prefix + name + ":{" + key + "}",
// so the keys of one identity (the same key under several limits) share a
// slot and different identities spread over the cluster. A go-redis Ring
// shards by the same hash tags, but nothing checks that a layered call's
// keys are on one shard: use the same rule. The tag must not contain a
// brace, and must not be empty (Redis would hash the whole key).
func WithHashTag(tag string) Option {
	return func(c *config) {
		if tag == "" {
			c.failf("WithHashTag: empty tag")
		}
		for i := 0; i < len(tag); i++ {
			if tag[i] == '}' || tag[i] == '{' {
				c.failf("WithHashTag: tag %q contains a brace", tag)
			}
		}
		c.tag = &tag
	}
}

// WithTimeout bounds each call to Redis (default 100ms), on top of the
// caller's context. A call that times out after it was sent may still have
// consumed quota; it is never retried. Decisions batched into one call
// (on one server, under concurrent callers) are bounded by that call,
// which ends by the earliest of their timeouts, each from its own start: a
// decision can so end sooner than its own timeout, by at most the time
// between its start and the batch's first's; one whose timeout passes
// while it waits for its batch is not sent.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.failf("WithTimeout: timeout must be > 0, got %v", d)
		}
		c.timeout = d
	}
}

// WithBreaker makes the limiter use b, typically shared with the other
// limiters on the same client. The default is a breaker of its own with
// NewBreaker(5, time.Second).
func WithBreaker(b *Breaker) Option {
	return func(c *config) {
		if b == nil {
			c.failf("WithBreaker: nil Breaker")
		}
		c.breaker = b
	}
}

// WithLocalDenials turns on the two-tier mode: the limiter remembers, in
// process, up to maxKeys keys that Redis denied and until when, and
// answers requests on them locally until their RetryAfter has passed. An
// abusive client then costs no round trip per request. Such a local
// denial reports the Remaining of the cached denial and its RetryAfter and
// ResetAfter counted down. 0 turns it off (the default).
func WithLocalDenials(maxKeys int) Option {
	return func(c *config) {
		if maxKeys < 0 {
			c.failf("WithLocalDenials: maxKeys must be ≥ 0, got %d", maxKeys)
		}
		c.denyKeys = maxKeys
	}
}

// WithLeases puts the limiter in lease mode: it decides each request in
// process from units it leases from the key's state in Redis, debited
// there before they are spent here, so that every instance sharing the
// state still admits no more than the policy grants in total, at
// in-process speed (see the package doc, "Leases", for the bounds). The
// policy must be a hotlimit.TokenBucket or FixedWindow (New returns the
// error otherwise).
//
// maxLease bounds the units the limiter holds unspent per key (0: a
// tenth of the limit, at least 1): with n instances, at most n·maxLease
// units of a key's budget sit debited in Redis but unspent at any
// instant. period is how long a lease should last at the key's recent
// rate (0: 100ms): a refill asks for the units spent over the last
// refill interval scaled to one period, within [1, maxLease]. Every take
// and give-back is one call with the limiter's timeout, breaker, hooks
// and failure policy.
//
// In lease mode a Decision says what an instance can know of a budget it
// shares:
//   - Limit is the policy's Burst or Limit;
//   - Remaining is the units this instance's lease holds for the key after
//     the decision: what it admits next without a round trip (the shared
//     budget may hold more, which Redis lends on the next take, or less,
//     since the other instances hold leases too);
//   - RetryAfter, for a request Redis refused, is Redis's: the wait after
//     which the shared state admits the same cost if nothing else
//     consumes, counted from when the take was sent (a refusal answered
//     from this instance's memory of it is counted down); 0 when admitted;
//   - ResetAfter is the time until the shared state is fresh again as the
//     last take from this instance saw it, counted down: a lower bound,
//     since other instances may have consumed since (for a fixed window,
//     exactly the time to the window's end).
//
// AllowN, Allow and AllowLayers decide from leases (a layered call's
// limiters must all be in lease mode, else ErrMixedLayers); AdmitN records
// nothing, Wait and Reset work as without leases, and WithLocalDenials
// has no effect (a lease remembers Redis's refusals itself).
// Call SweepLeases periodically so that idle keys hold no budget and no
// memory; Close gives back what the leases hold, and the limiter then
// refuses every request with ErrClosed.
func WithLeases(maxLease int64, period time.Duration) Option {
	return func(c *config) {
		if maxLease < 0 {
			c.failf("WithLeases: maxLease must be ≥ 0, got %d", maxLease)
		}
		if period < 0 {
			c.failf("WithLeases: period must be ≥ 0, got %v", period)
		}
		c.leases, c.maxLease, c.period = true, maxLease, period
	}
}
