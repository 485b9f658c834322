package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	guber "github.com/gubernator-io/gubernator/v2"
	"github.com/hotlimit/hotlimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Domain is the rate limit domain the RLS target's requests name.
const Domain = "bench"

// DescriptorKey returns the entry key of a request's j-th descriptor
// ("d0", "d1", ...): descriptor j is limited by the rule of that key, and
// gubernator's rate limit j is named after it.
func DescriptorKey(j int) string { return "d" + strconv.Itoa(j) }

// OverKey returns the entry key a request's j-th descriptor has instead
// when its key is one of the over-limit share (RLS.Over, Gubernator.Over):
// "x0", "x1", ... Config limits it to 1 an hour, so such a key is over the
// limit from its second hit on for the rest of a run.
func OverKey(j int) string { return "x" + strconv.Itoa(j) }

// OverLimit and OverPeriod are the limit of an OverKey's rule.
const (
	OverLimit  = 1
	OverPeriod = time.Hour
)

// KeyNames returns the names of a key space of n keys ("k000000", ...),
// the descriptor values and gubernator unique keys the callers send.
func KeyNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("k%06d", i)
	}
	return names
}

// Dial opens n gRPC client connections (plaintext: loopback only), to the
// addresses in turn (to replicas of a service, each gets n/len(addrs) or
// one more), over which callers are spread round robin: one HTTP/2
// connection serialises its frames, and a service behind it would be
// measured through that bottleneck.
func Dial(n int, addrs ...string) ([]*grpc.ClientConn, error) {
	if n <= 0 || len(addrs) == 0 {
		return nil, fmt.Errorf("bench: connections must be > 0 (got %d), to at least one address (got %d)", n, len(addrs))
	}
	conns := make([]*grpc.ClientConn, 0, n)
	for i := range n {
		c, err := grpc.NewClient(addrs[i%len(addrs)], grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			Close(conns)
			return nil, err
		}
		c.Connect()
		conns = append(conns, c)
	}
	return conns, nil
}

// Close closes conns.
func Close(conns []*grpc.ClientConn) {
	for _, c := range conns {
		c.Close()
	}
}

// RLS is the Target that calls envoy's RateLimitService/ShouldRateLimit:
// each request has one descriptor per key, descriptor j holding the one
// entry {DescriptorKey(j): key name}, in Domain, hits_addend 1.
type RLS struct {
	Conns []*grpc.ClientConn
	Keys  []string // KeyNames of the run's key space
	// Over is the over-limit share: a key whose index is below Over is
	// sent under OverKey(j), not DescriptorKey(j). With keys uniform,
	// Over/len(Keys) of the descriptors are over the limit.
	Over int
}

// NewCaller implements Target.
func (t *RLS) NewCaller(i int) Caller {
	return &rlsCaller{client: rlsv3.NewRateLimitServiceClient(t.Conns[i%len(t.Conns)]), keys: t.Keys, over: t.Over}
}

type rlsCaller struct {
	client rlsv3.RateLimitServiceClient
	keys   []string
	over   int
	req    rlsv3.RateLimitRequest
}

func (c *rlsCaller) Call(ctx context.Context, keys []int) (bool, error) {
	if len(c.req.Descriptors) != len(keys) {
		c.req.Domain = Domain
		c.req.HitsAddend = 1
		c.req.Descriptors = make([]*commonrl.RateLimitDescriptor, len(keys))
		for j := range keys {
			c.req.Descriptors[j] = &commonrl.RateLimitDescriptor{
				Entries: []*commonrl.RateLimitDescriptor_Entry{{Key: DescriptorKey(j)}},
			}
		}
	}
	for j, k := range keys {
		e := c.req.Descriptors[j].Entries[0]
		e.Key, e.Value = DescriptorKey(j), c.keys[k]
		if k < c.over {
			e.Key = OverKey(j)
		}
	}
	resp, err := c.client.ShouldRateLimit(ctx, &c.req)
	if err != nil {
		return false, err
	}
	if len(resp.Statuses) != len(keys) {
		return false, fmt.Errorf("bench: %d descriptors, %d statuses in the reply", len(keys), len(resp.Statuses))
	}
	switch resp.OverallCode {
	case rlsv3.RateLimitResponse_OK:
		return false, nil
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		return true, nil
	}
	return false, fmt.Errorf("bench: overall code %v", resp.OverallCode)
}

// Algorithm names the refill rule both systems are asked for, whatever
// each calls it (see hotlimitd/RESULTS.md).
type Algorithm string

const (
	// Bucket refills continuously, Limit per Period, and holds at most
	// Limit: hotlimit's TokenBucket (GCRA), gubernator's LEAKY_BUCKET.
	Bucket Algorithm = "bucket"
	// Window admits Limit per Period and starts again at the Period's
	// end: hotlimit's FixedWindow (windows aligned on the clock),
	// gubernator's TOKEN_BUCKET (a window that starts at a key's first hit).
	Window Algorithm = "window"
)

// ParseAlgorithm returns the Algorithm named s.
func ParseAlgorithm(s string) (Algorithm, error) {
	switch a := Algorithm(s); a {
	case Bucket, Window:
		return a, nil
	}
	return "", fmt.Errorf("bench: unknown algorithm %q (want %q or %q)", s, Bucket, Window)
}

// Gubernator is the Target that calls gubernator's V1/GetRateLimits: each
// request holds one RateLimitReq per key, rate limit j named
// DescriptorKey(j), with unique key the key's name, hits 1, and the limit,
// algorithm and behavior given here.
type Gubernator struct {
	Conns     []*grpc.ClientConn
	Keys      []string
	Algorithm Algorithm
	Limit     int64
	Period    time.Duration
	Behavior  guber.Behavior
	// Over is the over-limit share, as RLS.Over: a key whose index is
	// below Over is rate limit OverKey(j), of OverLimit per OverPeriod.
	Over int
}

// NewCaller implements Target.
func (t *Gubernator) NewCaller(i int) Caller {
	return &guberCaller{t: t, client: guber.NewV1Client(t.Conns[i%len(t.Conns)])}
}

type guberCaller struct {
	t      *Gubernator
	client guber.V1Client
	req    guber.GetRateLimitsReq
}

func (c *guberCaller) Call(ctx context.Context, keys []int) (bool, error) {
	if len(c.req.Requests) != len(keys) {
		alg := guber.Algorithm_LEAKY_BUCKET
		if c.t.Algorithm == Window {
			alg = guber.Algorithm_TOKEN_BUCKET
		}
		c.req.Requests = make([]*guber.RateLimitReq, len(keys))
		for j := range keys {
			c.req.Requests[j] = &guber.RateLimitReq{Hits: 1, Algorithm: alg, Behavior: c.t.Behavior}
		}
	}
	for j, k := range keys {
		r := c.req.Requests[j]
		r.UniqueKey = c.t.Keys[k]
		r.Name, r.Limit, r.Burst, r.Duration = DescriptorKey(j), c.t.Limit, c.t.Limit, c.t.Period.Milliseconds()
		if k < c.t.Over {
			r.Name, r.Limit, r.Burst, r.Duration = OverKey(j), OverLimit, OverLimit, OverPeriod.Milliseconds()
		}
	}
	resp, err := c.client.GetRateLimits(ctx, &c.req)
	if err != nil {
		return false, err
	}
	if len(resp.Responses) != len(keys) {
		return false, fmt.Errorf("bench: %d rate limits, %d responses in the reply", len(keys), len(resp.Responses))
	}
	over := false
	for _, r := range resp.Responses {
		if r.Error != "" {
			return false, errors.New("bench: gubernator: " + r.Error)
		}
		over = over || r.Status == guber.Status_OVER_LIMIT
	}
	return over, nil
}

// Policy returns the hotlimit policy of a, Limit per Period: a
// TokenBucket of Burst limit refilling limit per period, or a
// FixedWindow of limit per period.
func Policy(a Algorithm, limit int64, period time.Duration) hotlimit.Policy {
	if a == Window {
		return hotlimit.FixedWindow{Limit: limit, Window: period}
	}
	return hotlimit.TokenBucket{Rate: hotlimit.Rate{N: limit, Per: period}, Burst: limit}
}

// Config returns the configuration of the RLS target's requests, which
// hotlimitd and envoyproxy/ratelimit both read: domain Domain, one key-only
// rule per descriptor position j (key DescriptorKey(j), each value counted
// apart), each with a limit of requests per unit ("second", "minute",
// "hour" or "day") under a, as Policy gives it; with over, also a rule per
// OverKey(j) of OverLimit an hour. A Window's rules name no algorithm:
// fixed_window is hotlimitd's default and envoyproxy/ratelimit's only one
// (it refuses the algorithm key, a Bucket's token_bucket).
func Config(a Algorithm, limit int64, unit string, descriptors int, over bool) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "domain: %s\ndescriptors:\n", Domain)
	rule := func(key, unit string, limit int64) {
		fmt.Fprintf(&b, "  - key: %s\n    rate_limit:\n      unit: %s\n      requests_per_unit: %d\n", key, unit, limit)
		if a == Bucket {
			b.WriteString("      algorithm: token_bucket\n")
		}
	}
	for j := range descriptors {
		rule(DescriptorKey(j), unit, limit)
		if over {
			rule(OverKey(j), "hour", OverLimit)
		}
	}
	return []byte(b.String())
}

// Units are the units Config and the command take, with their periods.
var Units = map[string]time.Duration{"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}
