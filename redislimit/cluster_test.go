package redislimit

import (
	"context"
	"errors"
	"fmt"
	"github.com/hotlimit/hotlimit/admission"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestSlot checks slot against the values Redis Cluster documents and
// computes (CLUSTER KEYSLOT).
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            0x31c3 % clusterSlots, // CRC-16/XMODEM's check value
		"foo":                  12182,
		"{user1000}.following": slot("user1000"),
		"foo{}{bar}":           slot("foo{}{bar}"), // empty first tag: the whole key
		"foo{{bar}}zap":        slot("{bar"),
		"foo{bar}{zap}":        slot("bar"),
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
	if got := slot("foo{}{bar}"); got != int(crc16("foo{}{bar}")%clusterSlots) {
		t.Errorf("an empty tag did not hash the whole key")
	}
	addrs := os.Getenv(redistest.ClusterEnv)
	if addrs == "" {
		return
	}
	c := redistest.ClusterClient(t, strings.Split(addrs, ","))
	for _, key := range []string{"", "}", "{}", "a{b}c", "x{}{y}", "}{", "hotlimit:login:{alice}", "\xff{\x00}"} {
		want, err := c.ClusterKeySlot(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := slot(key); got != int(want) {
			t.Errorf("slot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
		}
	}
}

// TestClusterIdentitySlot: on a cluster, the keys of one identity under
// several limits (no hash tag) share a slot for every byte string,
// including the empty key and keys that start with "}" (for which Redis
// would hash the whole key name), so a layered call on them works.
func TestClusterIdentitySlot(t *testing.T) {
	c := redistest.ClusterClient(t, redistest.ClusterAddrs(t))
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	a := must(New(c, "a", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 3}, WithPrefix(prefix), WithTimeout(5*time.Second)))
	b := must(New(c, "b", hotlimit.SlidingWindow{Limit: 2, Window: time.Hour}, WithPrefix(prefix), WithTimeout(5*time.Second)))
	for _, key := range []string{"", "}", "}{", "}}", "}a", "{", "{}", "a}", "alice", "\x00"} {
		if sa, sb := slot(a.RedisKey(key)), slot(b.RedisKey(key)); sa != sb {
			t.Errorf("key %q: slots %d and %d under two limits", key, sa, sb)
		}
		for i, want := range []bool{true, true, false} {
			d, err := AllowLayers(ctx, Layer{a, key, 1}, Layer{b, key, 1})
			if err != nil || d.Allowed != want {
				t.Fatalf("key %q, call %d: %+v, %v; want Allowed %v from Redis", key, i, d, err, want)
			}
		}
	}
	// The special layout keeps keys apart: "" and "}" are two keys.
	if a.RedisKey("") == a.RedisKey("}") || a.RedisKey("}") == a.RedisKey("}}") {
		t.Fatal("two keys share a Redis key")
	}
}

// TestClusterCrossSlot: layers whose keys are in different slots cannot
// be one script: the call fails with ErrCrossSlot and a denial, without a
// round trip, whatever the failure policy (a fail-open policy must not
// turn a configuration error into admitting everyone).
func TestClusterCrossSlot(t *testing.T) {
	c := redistest.ClusterClient(t, redistest.ClusterAddrs(t))
	var sent redistest.Counter
	c.AddHook(&sent)
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	p := hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 3}
	var rec recorder
	user := must(New(c, "user", p, WithPrefix(prefix), WithFailOpen(), WithHooks(rec.hooks())))
	ip := must(New(c, "ip", p, WithPrefix(prefix), WithFailOpen()))
	// Find two keys in different slots.
	k2 := ""
	for i := 0; slot(ip.RedisKey(k2)) == slot(user.RedisKey("u1")); i++ {
		k2 = "10.0.0." + strconv.Itoa(i)
	}
	before := sent.N()
	d, err := AllowLayers(ctx, Layer{user, "u1", 1}, Layer{ip, k2, 1})
	if !errors.Is(err, ErrCrossSlot) || errors.Is(err, ErrUnavailable) || d.Allowed || d.RetryAfter != hotlimit.Never {
		t.Fatalf("layers over two slots: %+v, %v; want a denial with ErrCrossSlot", d, err)
	}
	if sent.N() != before {
		t.Fatal("a cross-slot call went to Redis")
	}
	if len(rec.config) != 1 || rec.config[0] != err || len(rec.failures) != 0 {
		t.Fatalf("the hooks saw %v (failures %v); want the returned error in Misconfigured", rec.config, rec.failures)
	}
	// The same layers with one hash tag work.
	tu := must(New(c, "user", p, WithPrefix(prefix), WithHashTag("t"), WithTimeout(5*time.Second)))
	ti := must(New(c, "ip", p, WithPrefix(prefix), WithHashTag("t"), WithTimeout(5*time.Second)))
	if d, err := AllowLayers(ctx, Layer{tu, "u1", 1}, Layer{ti, k2, 1}); err != nil || !d.Allowed {
		t.Fatalf("tagged layers: %+v, %v", d, err)
	}
	// A backend with a failure policy does not hide it either.
	rb := must(NewBackend(c, map[string]hotlimit.Policy{"user": p, "ip": p}, WithPrefix(prefix), WithFailOpen()))
	if _, err := allow(ctx, rb, []admission.Layer{{Limit: "user", Key: "u1", Cost: 1}, {Limit: "ip", Key: k2, Cost: 1}}); !errors.Is(err, ErrCrossSlot) {
		t.Fatalf("backend over two slots: %v; want ErrCrossSlot", err)
	}
}

// clusterNodes returns the cluster's masters: address → node ID.
func clusterNodes(t testing.TB, c *redis.Client) map[string]string {
	t.Helper()
	out, err := c.ClusterNodes(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && strings.Contains(f[2], "master") {
			addr, _, _ := strings.Cut(f[1], "@")
			ids[addr] = f[0]
		}
	}
	return ids
}

// TestClusterResharding moves the slot of a limiter's keys from one
// master to another while decisions go on, as redis-cli --cluster reshard
// does: IMPORTING on the target, MIGRATING on the source, MIGRATE of the
// keys, then SETSLOT NODE everywhere. Every decision is made by Redis
// (ASK replies during the migration, MOVED after it, each followed once),
// and the quota is exact across the move.
func TestClusterResharding(t *testing.T) {
	addrs := redistest.ClusterAddrs(t)
	c := redistest.ClusterClient(t, addrs)
	ctx := context.Background()
	tag := fmt.Sprintf("reshard%d", time.Now().UnixNano())
	var asks, moves int
	hooks := Hooks{Call: func(node string, took time.Duration, err error) {
		if _, ok := redis.IsAskError(err); ok {
			asks++
		}
		if _, ok := redis.IsMovedError(err); ok {
			moves++
		}
	}}
	l := must(New(c, "rs", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 10},
		WithPrefix(redistest.Prefix(t)), WithHashTag(tag), WithTimeout(5*time.Second), WithHooks(hooks)))
	s := slot(l.RedisKey("k"))
	src := nodeOf(t, c, l.RedisKey("k"))
	direct := map[string]*redis.Client{}
	for _, a := range addrs {
		direct[a] = redistest.Client(t, a)
	}
	ids := clusterNodes(t, direct[src])
	var dst string
	for a := range ids {
		if a != src {
			dst = a
			break
		}
	}
	admitted := 0
	decide := func(key string, phase string) {
		t.Helper()
		d, err := l.Allow(ctx, key)
		if err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		if d.Allowed && key == "k" {
			admitted++
		}
	}
	for range 3 {
		decide("k", "before")
	}
	do := func(addr string, args ...any) {
		t.Helper()
		if err := direct[addr].Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%s %v: %v", addr, args, err)
		}
	}
	t.Cleanup(func() {
		// Leave the slot stable whatever happened, so that later tests
		// find a sane cluster.
		for a := range ids {
			direct[a].Do(context.Background(), "cluster", "setslot", s, "stable")
		}
	})
	do(dst, "cluster", "setslot", s, "importing", ids[src])
	do(src, "cluster", "setslot", s, "migrating", ids[dst])
	// Still on the source: decided there.
	decide("k", "migrating, key on the source")
	// A key the source does not hold: ASK, to the target.
	decide("fresh", "migrating, key absent")
	do(src, "migrate", strings.Split(dst, ":")[0], strings.Split(dst, ":")[1], "", 0, 5000, "keys", l.RedisKey("k"))
	for range 3 {
		decide("k", "migrating, key on the target")
	}
	for a := range ids {
		do(a, "cluster", "setslot", s, "node", ids[dst])
	}
	// The client's slot map still names the source: MOVED, followed.
	for range 6 {
		decide("k", "moved")
	}
	if asks != 4 || moves == 0 {
		t.Fatalf("%d ASK and %d MOVED replies; want 4 ASK (the absent key, then the migrated one three times) and some MOVED", asks, moves)
	}
	if admitted != 10 {
		t.Fatalf("%d of 13 requests admitted across the move; want exactly the burst, 10", admitted)
	}
	if got := nodeOf(t, c, l.RedisKey("k")); got != dst {
		redistest.WaitFor(t, "the slot map to follow the move", func() bool { return nodeOf(t, c, l.RedisKey("k")) == dst })
	}
	if n := direct[dst].Exists(ctx, l.RedisKey("k")).Val(); n != 1 {
		t.Fatal("the key is not on the target")
	}
}

// TestClusterDeadMaster: with one of three masters killed, the keys the
// other two serve are still decided by Redis, every one; only the dead
// master's keys get the failure policy's answer (here FailClosed), fast
// once its circuit is open.
func TestClusterDeadMaster(t *testing.T) {
	srvs := redistest.StartCluster(t, 3)
	var addrs []string
	for _, s := range srvs {
		addrs = append(addrs, s.Addr())
	}
	c := redistest.ClusterClient(t, addrs)
	ctx := context.Background()
	var transitions []string
	hooks := Hooks{Breaker: func(node string, from, to string) {
		transitions = append(transitions, node+":"+from+"->"+to)
	}}
	// A timeout far above any call's on a loaded machine: a live master's
	// call that timed out (the default is 100ms) would fail the test and
	// count against that master's circuit. The dead one refuses the
	// connection at once.
	l := must(New(c, "dm", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1000},
		WithBreaker(NewBreaker(2, time.Hour)), WithHooks(hooks), WithTimeout(10*time.Second)))
	keys := make([]string, 60)
	node := map[string]string{}
	for i := range keys {
		keys[i] = "user" + strconv.Itoa(i)
		node[keys[i]] = nodeOf(t, c, l.RedisKey(keys[i]))
		if _, err := l.Allow(ctx, keys[i]); err != nil {
			t.Fatal(err)
		}
	}
	dead := srvs[0].Addr()
	srvs[0].Stop()
	var healthy, open int
	for round := range 3 {
		for _, k := range keys {
			d, err := l.Allow(ctx, k)
			if node[k] != dead {
				if err != nil || !d.Allowed {
					t.Fatalf("round %d, key %s on a live master: %+v, %v", round, k, d, err)
				}
				healthy++
				continue
			}
			if !errors.Is(err, ErrUnavailable) || d.Allowed {
				t.Fatalf("round %d, key %s on the dead master: %+v, %v; want a FailClosed denial", round, k, d, err)
			}
			if errors.Is(err, ErrCircuitOpen) {
				open++
			}
		}
	}
	if healthy == 0 || open == 0 {
		t.Fatalf("%d decisions on live masters, %d fast failures on the dead one: the keys did not spread", healthy, open)
	}
	if len(transitions) != 1 || transitions[0] != dead+":closed->open" {
		t.Fatalf("breaker transitions %v; want only the dead master's circuit to open", transitions)
	}
	if st := l.breaker.state(dead); st != "open" {
		t.Fatalf("the dead master's circuit is %v", st)
	}
}

// TestClusterOps: Refund, Reset, Wait and the concurrency limit reach the
// node of their key on a cluster, for keys spread over every master.
func TestClusterOps(t *testing.T) {
	c := redistest.ClusterClient(t, redistest.ClusterAddrs(t))
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	l := must(New(c, "ops", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 2}, WithPrefix(prefix), WithTimeout(5*time.Second)))
	cc := must(NewConcurrency(c, "ops", 1, time.Minute, WithPrefix(prefix), WithTimeout(5*time.Second)))
	nodes := map[string]bool{}
	for i := range 30 {
		k := "k" + strconv.Itoa(i)
		nodes[nodeOf(t, c, l.RedisKey(k))] = true
		if err := l.Wait(ctx, k, 1); err != nil {
			t.Fatalf("Wait on %s: %v", k, err)
		}
		var a Admission
		if d := must(l.AdmitN(ctx, &a, k, 1)); !d.Allowed {
			t.Fatalf("AdmitN on %s: %+v", k, d)
		}
		if ok, err := a.Refund(ctx); err != nil || !ok {
			t.Fatalf("Refund on %s: %v, %v", k, ok, err)
		}
		if d := must(l.AllowN(ctx, k, 0)); d.Remaining != 1 {
			t.Fatalf("%s after a refund of 1: %+v", k, d)
		}
		if err := l.Reset(ctx, k); err != nil {
			t.Fatal(err)
		}
		if d := must(l.AllowN(ctx, k, 0)); d.Remaining != 2 {
			t.Fatalf("%s after Reset: %+v", k, d)
		}
		p, ok, err := cc.TryAcquireN(ctx, k, 1)
		if !ok || err != nil {
			t.Fatalf("TryAcquire %s: %v, %v", k, ok, err)
		}
		if _, ok, _ := cc.TryAcquireN(ctx, k, 1); ok {
			t.Fatalf("a second permit on %s with a limit of 1", k)
		}
		if ok, err := p.Release(ctx); !ok || err != nil {
			t.Fatalf("Release %s: %v, %v", k, ok, err)
		}
	}
	if len(nodes) < 2 {
		t.Fatalf("the keys reached %d nodes", len(nodes))
	}
}

// TestClusterSlotMapTimeout: finding a key's node is bounded by the
// limiter's timeout too: a cluster client whose only seed accepts
// connections and never answers (so it cannot load its slot map) fails
// the call after WithTimeout, not after the client's read timeout.
func TestClusterSlotMapTimeout(t *testing.T) {
	redistest.Addr(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{ln.Addr().String()}, MaxRetries: -1, MaxRedirects: -1, ContextTimeoutEnabled: true,
		DialTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: time.Minute, Protocol: 2, DisableIdentity: true,
	})
	defer c.Close()
	l := must(New(c, "smt", slowBucket, WithTimeout(50*time.Millisecond)))
	start := time.Now()
	d, err := l.Allow(context.Background(), "k")
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("the call took %v with a 50ms timeout", took)
	}
	if !errors.Is(err, ErrUnavailable) || d.Allowed {
		t.Fatalf("%+v, %v; want a FailClosed denial", d, err)
	}
}
