package redislimit

import (
	"fmt"
	"strings"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/redislimit/internal/bridge"
)

// Option configures a Limiter.
type Option func(*config)

type config struct {
	prefix   string
	tag      *string
	timeout  time.Duration
	breaker  *Breaker
	fail     FailurePolicy
	failSet  bool
	denyKeys int
	hooks    *Hooks
	leaser   func(l any, policy hotlimit.Policy) (bridge.Leaser, error) // lease.Mode, or nil
	err      error
}

func (c *config) failf(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("redislimit: "+format, args...)
	}
}

// DefaultPrefix starts every Redis key a Limiter writes, unless
// WithPrefix says otherwise.
const DefaultPrefix = "hotlimit:"

// DefaultTimeout bounds each call to Redis unless WithTimeout says
// otherwise.
const DefaultTimeout = 100 * time.Millisecond

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
// consumed quota; it is never retried.
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
// DefaultFailures and DefaultCooldown.
func WithBreaker(b *Breaker) Option {
	return func(c *config) {
		if b == nil {
			c.failf("WithBreaker: nil Breaker")
		}
		c.breaker = b
	}
}

// WithFailurePolicy sets what the limiter answers when Redis cannot
// decide (default FailClosed).
func WithFailurePolicy(p FailurePolicy) Option {
	return func(c *config) {
		if p.mode == failFallback && p.local == nil {
			c.failf("WithFailurePolicy: FallbackTo(nil)")
		}
		c.fail, c.failSet = p, true
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
