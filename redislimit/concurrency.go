package redislimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/redis/go-redis/v9"
)

// Concurrency allows at most Limit operations in flight per key across
// every process that uses the same Redis, prefix and name, as
// hotlimit.ConcurrencyLimiter does in one process: an export endpoint may
// allow 2 running exports per tenant whatever their rate.
//
// Each permit is a lease: it ends Lease after it was acquired (or last
// renewed, see Permit.Renew) if it is not released first, so the units of
// a holder that crashed, or lost touch with Redis, are free again after at
// most Lease. Choose Lease longer than the operations it guards, or renew
// long ones. Instants are the Redis server's.
//
// The key's state is a sorted set of its permits, at the Redis key
// prefix + name + "^{" + key + "}" (or with WithHashTag, prefix + "{" +
// tag + "}" + name + "^{" + key + "}"), apart from any rate limiter's
// keys. It takes the options of New except WithLocalDenials,
// WithFallbackLocal and WithLeases: when Redis cannot decide, it refuses
// (fails closed, the default), or with WithFailOpen grants a permit that
// holds nothing.
//
// A Concurrency is safe for concurrent use. Create one with
// NewConcurrency; the zero value is not usable.
type Concurrency struct {
	l     *Limiter // routing, key layout, breaker, timeout, hooks
	limit int64
	lease int64 // µs
	argv  [2]any
}

// NewConcurrency returns a limit of limit operations in flight per key,
// each held for at most lease unless renewed or released. lease must be
// a whole number of milliseconds, at least 1ms.
func NewConcurrency(client redis.Scripter, name string, limit int64, lease time.Duration, opts ...Option) (*Concurrency, error) {
	switch {
	case limit <= 0:
		return nil, fmt.Errorf("redislimit: concurrency limit must be > 0, got %d", limit)
	case limit > maxMicros:
		return nil, fmt.Errorf("redislimit: concurrency limit %d exceeds 2^50", limit)
	case lease < time.Millisecond || lease%time.Millisecond != 0 || lease/time.Microsecond > maxMicros:
		return nil, fmt.Errorf("redislimit: lease %v must be a whole number of milliseconds from 1ms to 2^50µs", lease)
	}
	// A Limiter of any valid policy carries the options, the router and
	// the breaker; its policy is never used.
	l, err := New(client, name, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, opts...)
	if err != nil {
		return nil, err
	}
	switch {
	case l.cache != nil:
		return nil, fmt.Errorf("redislimit: NewConcurrency: WithLocalDenials has no meaning for a concurrency limit")
	case l.local != nil:
		l.Close()
		return nil, fmt.Errorf("redislimit: NewConcurrency: WithFallbackLocal is not supported (fail closed, the default, or WithFailOpen)")
	case l.leases != nil:
		return nil, fmt.Errorf("redislimit: NewConcurrency: WithLeases has no meaning for a concurrency limit")
	}
	// Keys apart from the rate limiters': the character before the first
	// brace after the name is "^" (or "&" for the special layout).
	l.head = strings.TrimSuffix(l.head, ":{") + "^{"
	if l.special != "" {
		l.special = strings.TrimSuffix(l.special, "!{~}") + "&{~}"
	}
	us := int64(lease / time.Microsecond)
	return &Concurrency{l: l, limit: limit, lease: us,
		argv: [2]any{strconv.FormatInt(limit, 10), strconv.FormatInt(us, 10)}}, nil
}

// Permit is a held concurrency slot of n units on a key. Release it when
// the operation ends; renew it while a long one runs. Permits are values:
// copying one copies the right to release it once, and only the first
// Release counts. The zero Permit holds nothing.
type Permit struct {
	c      *Concurrency
	key    string
	member string // "n:id" in the key's set; "" for a permit that holds nothing
}

// TryAcquireN takes n units for key if they are free, without waiting, in
// one round trip. It reports false when they are not (or n is not in
// [1, Limit], or the key is longer than hotlimit.MaxKeyLen). When Redis
// cannot decide, the error wraps ErrUnavailable and the failure policy
// answers: false by default (fail closed), or with WithFailOpen true
// with a Permit that holds nothing.
func (c *Concurrency) TryAcquireN(ctx context.Context, key string, n int64) (Permit, bool, error) {
	if n < 1 || n > c.limit || len(key) > hotlimit.MaxKeyLen {
		return Permit{}, false, nil
	}
	var id [12]byte
	rand.Read(id[:])
	member := strconv.FormatInt(n, 10) + ":" + hex.EncodeToString(id[:])
	r, err := c.l.call1(ctx, permitScript, []string{c.l.RedisKey(key)}, c.now(), "acquire", member, n, c.argv[0], c.argv[1])
	if err != nil {
		return Permit{}, c.l.fail.mode == failOpen, err
	}
	if len(r) != 2 || r[0] != 1 {
		return Permit{}, false, nil
	}
	return Permit{c: c, key: key, member: member}, true, nil
}

// InFlight returns how many units key has in flight: permits acquired,
// not released and whose lease has not ended. It writes nothing but the
// removal of ended leases.
func (c *Concurrency) InFlight(ctx context.Context, key string) (int64, error) {
	r, err := c.l.call1(ctx, permitScript, []string{c.l.RedisKey(key)}, c.now(), "acquire", "0:", c.limit+1, c.argv[0], c.argv[1])
	if err != nil {
		return 0, err
	}
	if len(r) != 2 {
		return 0, fmt.Errorf("%w: redislimit: unexpected reply %v", ErrUnavailable, r)
	}
	return r[1], nil
}

// Release gives the permit's units back. It reports whether the permit
// still held them: false for a second Release, for the zero Permit, and
// for a permit whose lease had ended (its units were already free). An
// error wraps ErrUnavailable; the lease then ends on its own.
func (p Permit) Release(ctx context.Context) (bool, error) {
	if p.member == "" {
		return false, nil
	}
	r, err := p.c.l.call1(ctx, permitScript, []string{p.c.l.RedisKey(p.key)}, p.c.now(), "release", p.member, 0, p.c.argv[0], p.c.argv[1])
	if err != nil {
		return false, err
	}
	return len(r) == 1 && r[0] == 1, nil
}

// Renew extends the permit's lease to Lease from now. It reports false
// when the permit no longer holds its units (released, or its lease
// ended: another holder may have them now).
func (p Permit) Renew(ctx context.Context) (bool, error) {
	if p.member == "" {
		return false, nil
	}
	r, err := p.c.l.call1(ctx, permitScript, []string{p.c.l.RedisKey(p.key)}, p.c.now(), "renew", p.member, 0, p.c.argv[0], p.c.argv[1])
	if err != nil {
		return false, err
	}
	return len(r) == 1 && r[0] == 1, nil
}

// now is the script's instant argument: "" for the server's TIME.
func (c *Concurrency) now() string {
	if c.l.testNow != nil {
		return strconv.FormatInt(c.l.testNow(), 10)
	}
	return ""
}
