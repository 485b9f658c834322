package backend

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/redis/go-redis/v9"
)

// The Redis tests give every call a timeout of 5s: the default 100ms is
// exceeded on a loaded machine, which would fail them for no fault.
const slow = 5 * time.Second

// servers returns the Options of a Redis store on the test server and
// on the test Cluster, by name, each with a key prefix of its own.
func servers(t *testing.T, kind Kind) map[string]Options {
	t.Helper()
	return map[string]Options{
		"server":  {Kind: kind, RedisAddrs: []string{redisAddr(t)}, Prefix: redistest.Prefix(t), Timeout: slow},
		"cluster": {Kind: kind, RedisAddrs: clusterAddrs(t), Cluster: true, Prefix: redistest.Prefix(t), Timeout: slow},
	}
}

// churn keeps replacing s's limits with limits, with and without an
// extra limit beside them, until the returned stop is called or the test
// ends. Call it after opening s.
func churn(t *testing.T, s *Store, limits map[string]hotlimit.Policy) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; !done.Load(); i++ {
			next := map[string]hotlimit.Policy{}
			for k, v := range limits {
				next[k] = v
			}
			if i%2 == 0 {
				next["extra"] = frozen(7)
			}
			if err := s.Update(next); err != nil {
				t.Error(err)
				return
			}
		}
	})
	stop = func() { done.Store(true); wg.Wait() }
	t.Cleanup(stop) // before the stores close, should the test end first
	return stop
}

// TestReplicasExact: two replicas (two Stores) on one Redis, and on one
// Redis Cluster, with many goroutines each, admit exactly a key's limit
// between them, while one of them keeps reloading its limits; and a
// request of two layers is all or nothing across replicas: the layer
// that would admit more gives exactly what the binding layer admitted.
func TestReplicasExact(t *testing.T) {
	for name, o := range servers(t, Redis) {
		t.Run(name, func(t *testing.T) {
			const la, lb = 120, 170
			limits := map[string]hotlimit.Policy{"a": frozen(la), "b": frozen(lb)}
			r1, r2 := open(t, o, limits), open(t, o, limits)
			stop := churn(t, r1, limits)
			got := hammer(t, []*Store{r1, r2}, 4, 40, []admission.Layer{{Limit: "a", Key: "one", Cost: 1}}, nil)
			if got != la {
				stop()
				t.Fatalf("one layer: %d admitted by two replicas; want exactly %d", got, la)
			}
			// b first: a layer decided before the binding one must
			// not keep what it took when the request is refused.
			two := []admission.Layer{{Limit: "b", Key: "two", Cost: 1}, {Limit: "a", Key: "two", Cost: 1}}
			got = hammer(t, []*Store{r1, r2}, 4, 40, two, nil)
			stop()
			if got != la {
				t.Fatalf("two layers: %d admitted by two replicas; want exactly %d", got, la)
			}
			rest := []admission.Layer{{Limit: "b", Key: "two", Cost: lb - la}}
			for i, want := range []bool{true, false} {
				d, err := r2.Allow(context.Background(), rest)
				if err != nil || d.Allowed != want {
					t.Fatalf("b's rest, call %d: %+v, %v; want Allowed %v (b gave exactly %d)", i, d, err, want, la)
				}
			}
		})
	}
}

// TestRedisKeys: a limit's state is the Redis key Prefix + name + ":{" +
// key + "}", so it survives reloads and a replica started later sees it.
func TestRedisKeys(t *testing.T) {
	o := servers(t, Redis)["server"]
	r1 := open(t, o, map[string]hotlimit.Policy{"a": frozen(3)})
	a := admission.Layer{Limit: "a", Key: "k", Cost: 2}
	if d, err := r1.Allow(context.Background(), []admission.Layer{a}); err != nil || !d.Allowed {
		t.Fatalf("%+v, %v", d, err)
	}
	c := redistest.Client(t, o.RedisAddrs[0])
	if n, err := c.Exists(context.Background(), o.Prefix+"a:{k}").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS %sa:{k} = %d, %v; want 1", o.Prefix, n, err)
	}
	if err := r1.Update(map[string]hotlimit.Policy{"a": frozen(3), "b": frozen(1)}); err != nil {
		t.Fatal(err)
	}
	r2 := open(t, o, map[string]hotlimit.Policy{"a": frozen(3)})
	a.Cost = 1
	for i, r := range []*Store{r2, r1, r2} {
		d, err := r.Allow(context.Background(), []admission.Layer{a})
		if err != nil || d.Allowed != (i == 0) {
			t.Fatalf("call %d: %+v, %v; want only the first admitted (1 left of 3)", i, d, err)
		}
	}
}

// TestClusterCrossSlot: on a Cluster, a request whose layers' keys are in
// different slots is refused with ErrCrossSlot, unless the store has a
// HashTag, which puts every key in one slot.
func TestClusterCrossSlot(t *testing.T) {
	o := servers(t, Redis)["cluster"]
	limits := map[string]hotlimit.Policy{"a": frozen(5), "b": frozen(5)}
	layers := []admission.Layer{{Limit: "a", Key: "x", Cost: 1}, {Limit: "b", Key: "y", Cost: 1}}
	s := open(t, o, limits)
	if _, err := s.Allow(context.Background(), layers); !errors.Is(err, redislimit.ErrCrossSlot) {
		t.Fatalf("keys x and y without a HashTag: %v; want ErrCrossSlot", err)
	}
	o.HashTag = "hotlimitd"
	s = open(t, o, limits)
	if d, err := s.Allow(context.Background(), layers); err != nil || !d.Allowed {
		t.Fatalf("keys x and y with a HashTag: %+v, %v; want admitted", d, err)
	}
}

// TestReplicasLease: two Lease replicas on one Redis, and on one Redis
// Cluster, never admit more than a key's limit between them, while one of
// them keeps reloading its limits (Lease is not exact: units leased by
// one replica and unspent can be refused to the other).
func TestReplicasLease(t *testing.T) {
	for name, o := range servers(t, Lease) {
		t.Run(name, func(t *testing.T) {
			const limit = 150
			limits := map[string]hotlimit.Policy{"a": frozen(limit), "b": frozen(2 * limit)}
			o.MaxLease = 10
			r1, r2 := open(t, o, limits), open(t, o, limits)
			stop := churn(t, r1, limits)
			layers := []admission.Layer{{Limit: "b", Key: "k", Cost: 1}, {Limit: "a", Key: "k", Cost: 1}}
			got := hammer(t, []*Store{r1, r2}, 4, 60, layers, nil)
			stop()
			if got > limit || got < limit-2*o.MaxLease {
				t.Fatalf("%d admitted by two lease replicas; want at most %d, and at least %d (n·MaxLease less)", got, limit, limit-2*o.MaxLease)
			}
		})
	}
}

// TestLeaseUpdate: a Lease store's Update keeps the lease limiter of a
// limit it keeps (with its leases), and gives back to Redis the lease of
// a limit it drops, so that the shared budget gets those units back.
func TestLeaseUpdate(t *testing.T) {
	o := servers(t, Lease)["server"]
	o.MaxLease = 3
	s := open(t, o, map[string]hotlimit.Policy{"a": frozen(5), "b": frozen(5)})
	l := admission.Layer{Limit: "a", Key: "k", Cost: 1}
	// The first decision takes 2 units from Redis: 1 spent, 1 leased.
	if d, err := s.Allow(context.Background(), []admission.Layer{l}); err != nil || !d.Allowed {
		t.Fatalf("%+v, %v", d, err)
	}
	kept := s.cur.Load().remote["b"]
	if err := s.Update(map[string]hotlimit.Policy{"b": frozen(5)}); err != nil {
		t.Fatal(err)
	}
	if s.cur.Load().remote["b"] != kept {
		t.Fatal("Update replaced the limiter of a limit it kept")
	}
	o.Kind, o.MaxLease = Redis, 0
	r := open(t, o, map[string]hotlimit.Policy{"a": frozen(5)})
	got := admits(t, r, 5, l)
	if got != 4 {
		t.Fatalf("after the lease store dropped a: %d of 5 admitted; want 4 (its unspent unit given back)", got)
	}
}

// TestLeasePolicies: a Lease store refuses the policies a lease cannot
// hold, naming the limit.
func TestLeasePolicies(t *testing.T) {
	o := servers(t, Lease)["server"]
	_, err := Open(context.Background(), o, map[string]hotlimit.Policy{"ok": frozen(1), "sliding": hotlimit.SlidingWindow{Limit: 5, Window: time.Minute}})
	if err == nil || !strings.Contains(err.Error(), `limit "sliding"`) {
		t.Fatalf("Open: %v; want an error naming limit \"sliding\"", err)
	}
}

// gated is a Redis client whose next script call, once armed, holds its
// reply until released: a decision stays in flight as long as a test
// needs.
type gated struct {
	*redis.Client
	armed   atomic.Bool
	entered chan struct{} // the held call has its reply
	release chan struct{}
}

func (g *gated) hold() {
	if g.armed.CompareAndSwap(true, false) {
		g.entered <- struct{}{}
		<-g.release
	}
}

func (g *gated) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	cmd := g.Client.EvalSha(ctx, sha, keys, args...)
	g.hold()
	return cmd
}

func (g *gated) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	cmd := g.Client.Eval(ctx, src, keys, args...)
	g.hold()
	return cmd
}

// TestLeaseUpdateWaitsForDecisions: an Update that drops a limit closes
// its lease limiter only once the decisions in flight on it are done, so
// the units a take in flight leased are given back with the rest, never
// lost in a closed limiter.
func TestLeaseUpdateWaitsForDecisions(t *testing.T) {
	o := servers(t, Lease)["server"]
	g := &gated{Client: redistest.Client(t, o.RedisAddrs[0]), entered: make(chan struct{}), release: make(chan struct{})}
	lo := o
	lo.RedisAddrs, lo.Client, lo.MaxLease = nil, g, 3
	s := open(t, lo, map[string]hotlimit.Policy{"a": frozen(5)})
	l := admission.Layer{Limit: "a", Key: "k", Cost: 1}
	g.armed.Store(true)
	decided := make(chan error, 1)
	go func() {
		d, err := s.Allow(context.Background(), []admission.Layer{l})
		if err == nil && !d.Allowed {
			err = errors.New("refused")
		}
		decided <- err
	}()
	<-g.entered // the decision's take (2 units: 1 spent, 1 leased) is debited, its reply held
	updated := make(chan error, 1)
	go func() { updated <- s.Update(map[string]hotlimit.Policy{}) }()
	select {
	case err := <-updated:
		t.Fatalf("Update returned (%v) while a decision on the limit it drops was in flight", err)
	case <-time.After(100 * time.Millisecond): // a bug's Update returns at once; a correct one waits for the release
	}
	close(g.release)
	if err := <-decided; err != nil {
		t.Fatal(err)
	}
	if err := <-updated; err != nil {
		t.Fatal(err)
	}
	r := open(t, o, map[string]hotlimit.Policy{"a": frozen(5)})
	if got := admits(t, r, 5, l); got != 4 {
		t.Fatalf("after the drop: %d of 5 admitted; want 4 (the leased unit given back)", got)
	}
}

// slowed is a Redis client whose script calls start late, as on a loaded
// server.
type slowed struct {
	*redis.Client
	by time.Duration
}

func (c *slowed) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	time.Sleep(c.by)
	return c.Client.EvalSha(ctx, sha, keys, args...)
}

func (c *slowed) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	time.Sleep(c.by)
	return c.Client.Eval(ctx, src, keys, args...)
}

// TestLeaseTimeout: a Lease store's Timeout bounds its lease takes too (a
// lease has a timeout of its own, 100ms by default): with Timeout 5s, a
// take that waits 300ms decides.
func TestLeaseTimeout(t *testing.T) {
	o := servers(t, Lease)["server"]
	o.Client, o.RedisAddrs = &slowed{Client: redistest.Client(t, o.RedisAddrs[0]), by: 300 * time.Millisecond}, nil
	s := open(t, o, map[string]hotlimit.Policy{"a": frozen(5)})
	states := make([]hotlimit.LayerState, 1)
	d, _, err := s.AllowStates(context.Background(), []admission.Layer{{Limit: "a", Key: "k", Cost: 1}}, states)
	if err != nil || !d.Allowed {
		t.Fatalf("a take 300ms late under a 5s timeout: %+v, %v; want admitted", d, err)
	}
	// A lease cannot tell when the shared state admits more.
	if states[0].Next != hotlimit.Never || states[0].Decision.Remaining < 0 {
		t.Fatalf("lease state %+v; want the lease's Remaining and an unknown Window (Never)", states[0])
	}
}

// TestRedisDown: when Redis stops answering, a decision fails with an
// error saying Redis could not decide, and the Decision is a denial (the
// failure policy is the caller's).
func TestRedisDown(t *testing.T) {
	redisAddr(t) // fails in CI without the servers hotlimitd/test.sh starts
	srv := redistest.StartServer(t, 0)
	limits := map[string]hotlimit.Policy{"a": frozen(5)}
	stores := map[Kind]*Store{}
	for _, kind := range []Kind{Redis, Lease} {
		stores[kind] = open(t, Options{Kind: kind, RedisAddrs: []string{srv.Addr()}, Timeout: slow}, limits)
	}
	srv.Stop()
	for kind, s := range stores {
		d, err := s.Allow(context.Background(), []admission.Layer{{Limit: "a", Key: "k", Cost: 1}})
		if d.Allowed || !errors.Is(err, redislimit.ErrUnavailable) {
			t.Errorf("%s with Redis down: %+v, %v; want a denial and ErrUnavailable", kind, d, err)
		}
	}
}

// TestReplicasFixedWindow: envoyproxy/ratelimit's own algorithm, a fixed
// window, on two replicas: exactly its limit on Redis and on a Cluster,
// at most its limit on leases. The window is a day of the server's
// clock; a run that straddles midnight (UTC) is skipped, as the next
// window may then admit again.
func TestReplicasFixedWindow(t *testing.T) {
	const limit = 100
	limits := map[string]hotlimit.Policy{"w": hotlimit.FixedWindow{Limit: limit, Window: 24 * time.Hour}}
	layers := []admission.Layer{{Limit: "w", Key: "k", Cost: 1}}
	for _, kind := range []Kind{Redis, Lease} {
		for name, o := range servers(t, kind) {
			t.Run(string(kind)+"/"+name, func(t *testing.T) {
				if kind == Lease {
					o.MaxLease = 5
				}
				day := func() int64 {
					c := redistest.Client(t, redisAddr(t)) // the Cluster's nodes share the machine's clock
					now, err := c.Time(context.Background()).Result()
					if err != nil {
						t.Fatal(err)
					}
					return now.Unix() / 86400
				}
				before := day()
				r1, r2 := open(t, o, limits), open(t, o, limits)
				got := hammer(t, []*Store{r1, r2}, 4, 40, layers, nil)
				if day() != before {
					t.Skip("the day's window ended during the run")
				}
				if kind == Redis && got != limit || got > limit || got < limit-2*o.MaxLease {
					t.Fatalf("%d admitted by two %s replicas; want %d (less at most 2·MaxLease = %d on leases)", got, kind, limit, 2*o.MaxLease)
				}
			})
		}
	}
}
