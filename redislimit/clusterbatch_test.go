package redislimit

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// privateCluster starts a Cluster of 3 masters for the test alone (one it
// may reshard) and returns their addresses.
func privateCluster(t *testing.T) []string {
	var addrs []string
	for _, s := range redistest.StartCluster(t, 3) {
		addrs = append(addrs, s.Addr())
	}
	return addrs
}

// reshard moves slot s from the master at src to the one at dst, as
// redis-cli --cluster reshard does, one step per call of the function it
// returns (false once done): IMPORTING on dst, then MIGRATING on src, then
// MIGRATE of the slot's keys, then SETSLOT NODE on every master.
func reshard(t *testing.T, addrs []string, s int, src, dst string) func() bool {
	t.Helper()
	ctx := context.Background()
	direct := map[string]*redis.Client{}
	for _, a := range addrs {
		direct[a] = redistest.Client(t, a)
	}
	ids := clusterNodes(t, direct[src])
	do := func(addr string, args ...any) {
		if err := direct[addr].Do(ctx, args...).Err(); err != nil {
			t.Errorf("%s %v: %v", addr, args, err)
		}
	}
	steps := []func(){
		func() { do(dst, "cluster", "setslot", s, "importing", ids[src]) },
		func() { do(src, "cluster", "setslot", s, "migrating", ids[dst]) },
		func() {
			keys, err := direct[src].ClusterGetKeysInSlot(ctx, s, 1000).Result()
			if err != nil {
				t.Error(err)
				return
			}
			if len(keys) == 0 {
				return
			}
			host, port, _ := strings.Cut(dst, ":")
			args := []any{"migrate", host, port, "", 0, 5000, "keys"}
			for _, k := range keys {
				args = append(args, k)
			}
			do(src, args...)
		},
		func() {
			for _, a := range addrs {
				do(a, "cluster", "setslot", s, "node", ids[dst])
			}
		},
	}
	return func() bool {
		if len(steps) == 0 {
			return false
		}
		steps[0]()
		steps = steps[1:]
		return true
	}
}

// keyInSlot returns a key of l whose Redis key is in slot s, and a key
// whose Redis key is on node but in another slot than s, from keys named
// after prefix.
func keyInSlot(t *testing.T, c *redis.ClusterClient, l *Limiter, prefix string, s int, node string) (same, other string) {
	t.Helper()
	for i := 0; same == "" || other == ""; i++ {
		if i > 1_000_000 {
			t.Fatal("no key found")
		}
		k := prefix + strconv.Itoa(i)
		switch ks := slot(l.RedisKey(k)); {
		case ks == s && same == "":
			same = k
		case ks != s && other == "" && nodeOf(t, c, l.RedisKey(k)) == node:
			other = k
		}
	}
	return same, other
}

// forceBatch makes the decisions of ls, in order, one batch sent on b:
// every turn of b is taken, so each call queues (the next one only once
// the one before it is queued, fixing their order), and the test then
// sends the queue as one batch. It returns each decision and error.
func forceBatch(t *testing.T, b *batcher, ctxs []context.Context, ls ...Layer) ([]hotlimit.Decision, []error) {
	t.Helper()
	if b == nil {
		t.Fatal("no batcher for the node")
	}
	b.mu.Lock()
	b.inFlight = b.turns
	b.mu.Unlock()
	ds, errs := make([]hotlimit.Decision, len(ls)), make([]error, len(ls))
	var wg sync.WaitGroup
	for i, ly := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds[i], errs[i] = ly.Limiter.AllowN(ctxs[i], ly.Key, ly.Cost)
		}()
		batcherState(t, b, b.turns, i+1)
	}
	b.mu.Lock()
	batch := b.takeLocked(nil)
	b.mu.Unlock()
	go b.sendAll(batch)
	wg.Wait()
	b.mu.Lock()
	b.inFlight = 0 // sendAll gave back one turn, the test takes back the others
	b.mu.Unlock()
	return ds, errs
}

// TestClusterBatchReshard: decisions bound for one master of a Cluster go
// in one script call whatever their slots, decided in order, with each
// caller's context values (the first caller's for the batch) reaching the
// node's go-redis hooks; and through every step of a live reshard of one
// slot, a decision of a batch whose key the node no longer holds (the
// slot migrating and the key gone, or moved) is sent again alone and
// follows the ASK or MOVED reply, so that the quota stays exact: a
// fixed window of 3 admits exactly 3 of the 6 decisions on the migrating
// key, and every other key is decided where it lives.
func TestClusterBatchReshard(t *testing.T) {
	addrs := privateCluster(t)
	c := redistest.ClusterClient(t, addrs)
	var h spanHook
	c.OnNewNode(func(n *redis.Client) { n.AddHook(&h) })
	var redirects struct {
		sync.Mutex
		ask, moved, nonLocal int
	}
	hooks := Hooks{Call: func(node string, took time.Duration, err error) {
		redirects.Lock()
		defer redirects.Unlock()
		if _, ok := redis.IsAskError(err); ok {
			redirects.ask++
		}
		if _, ok := redis.IsMovedError(err); ok {
			redirects.moved++
		}
		if err != nil && strings.Contains(err.Error(), "non local key") {
			redirects.nonLocal++
		}
	}}
	ctx := context.Background()
	l := must(New(c, "cb", hotlimit.FixedWindow{Limit: 3, Window: time.Hour}, WithTimeout(time.Minute), WithHooks(hooks)))
	src := nodeOf(t, c, l.RedisKey("m"))
	s := slot(l.RedisKey("m"))
	var dst string
	for _, a := range addrs {
		if a != src {
			dst = a
			break
		}
	}
	fresh, other := keyInSlot(t, c, l, "n", s, src)
	_, other2 := keyInSlot(t, c, l, "o", s, src)
	_, onDst := keyInSlot(t, c, l, "d", s, dst)
	if _, err := l.Allow(ctx, "warm"+other); err != nil { // loads the scripts
		t.Fatal(err)
	}
	rt := routerFor(c)
	spans := func(names ...string) []context.Context {
		var out []context.Context
		for _, n := range names {
			out = append(out, withSpan(ctx, n))
		}
		return out
	}
	admittedM := 0
	check := func(phase string, keys []string, ds []hotlimit.Decision, errs []error) {
		t.Helper()
		for i, k := range keys {
			if errs[i] != nil {
				t.Fatalf("%s, key %s: %v", phase, k, errs[i])
			}
			if k == "m" {
				if ds[i].Allowed {
					admittedM++
				}
			} else if !ds[i].Allowed {
				t.Fatalf("%s, key %s: denied, %+v", phase, k, ds[i])
			}
		}
	}
	layers := func(keys ...string) []Layer {
		var out []Layer
		for _, k := range keys {
			out = append(out, Layer{l, k, 1})
		}
		return out
	}
	h.take()

	// Before: three slots of src, one script call, the first caller's
	// values.
	keys := []string{"m", other, other2}
	ds, errs := forceBatch(t, rt.batcherFor(src), spans("a", "b", "c"), layers(keys...)...)
	check("before", keys, ds, errs)
	if got := h.take(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("before the reshard, a batch of 3 decisions on 3 slots of one node: script calls with spans %q, want one, the first caller's", got)
	}

	step := reshard(t, addrs, s, src, dst)
	step() // IMPORTING on dst
	step() // MIGRATING on src: m is still there, fresh is not
	keys = []string{"m", fresh, other}
	ds, errs = forceBatch(t, rt.batcherFor(src), spans("d", "e", "f"), layers(keys...)...)
	check("migrating, m on the source", keys, ds, errs)
	step() // MIGRATE: m is on dst
	keys = []string{other2, "m", other}
	ds, errs = forceBatch(t, rt.batcherFor(src), spans("g", "h", "i"), layers(keys...)...)
	check("migrating, m on the target", keys, ds, errs)
	keys = []string{"m", fresh}
	ds, errs = forceBatch(t, rt.batcherFor(src), spans("j", "k"), layers(keys...)...)
	check("migrating, m and fresh on the target", keys, ds, errs)
	redirects.Lock()
	if redirects.ask != 4 || redirects.moved != 0 || redirects.nonLocal != 4 {
		t.Fatalf("while migrating: %d ASK, %d MOVED, %d non-local keys; want 4 of each (fresh, then m, then m and fresh, each left by its batch and sent again alone), none MOVED", redirects.ask, redirects.moved, redirects.nonLocal)
	}
	redirects.Unlock()
	step() // SETSLOT NODE: the slot is dst's; the client's map still says src
	if step() {
		t.Fatal("reshard has more steps than 4")
	}
	keys = []string{other2, "m"}
	ds, errs = forceBatch(t, rt.batcherFor(src), spans("l", "m"), layers(keys...)...)
	check("moved", keys, ds, errs)
	redirects.Lock()
	if redirects.moved != 1 {
		t.Fatalf("after the move: %d MOVED; want 1 (m sent again alone)", redirects.moved)
	}
	redirects.Unlock()
	redistest.WaitFor(t, "the slot map to follow the move", func() bool { return nodeOf(t, c, l.RedisKey("m")) == dst })
	h.take()
	keys = []string{onDst, "m"}
	ds, errs = forceBatch(t, rt.batcherFor(dst), spans("n", "o"), layers(keys...)...)
	check("after", keys, ds, errs)
	if got := h.take(); !slices.Equal(got, []string{"n"}) {
		t.Fatalf("after the reshard, a batch of 2 on dst: script calls with spans %q, want one, the first caller's", got)
	}
	if admittedM != 3 {
		t.Fatalf("the migrating key admitted %d of 6 decisions; want exactly its limit, 3", admittedM)
	}
	if d := must(l.AllowN(ctx, fresh, 0)); d.Remaining != 1 {
		t.Fatalf("the key created during the migration: %+v; want 2 of 3 used", d)
	}
}

// TestClusterBatchExactTotals: 4 instances (clients) × 16 goroutines
// decide on 8 keys spread over a Cluster's 3 masters, alone and in two
// layers (a bucket, then the fixed window counted), one of them in a
// slot that is resharded to another master while they decide (each step
// of the reshard taken once a quarter more of the decisions are made):
// every key admits exactly its limit, no call fails, and the decisions
// took fewer script calls than decisions (they were batched).
func TestClusterBatchExactTotals(t *testing.T) {
	addrs := privateCluster(t)
	const (
		instances, workers, perWorker, limit = 4, 16, 40, 200
		nKeys                                = 8
	)
	var runs atomic.Int64 // script calls, counted on the nodes' clients
	counter := &runCounter{n: &runs}
	var ls, gs []*Limiter
	var first *redis.ClusterClient
	for range instances {
		c := redistest.ClusterClient(t, addrs)
		c.OnNewNode(func(n *redis.Client) { n.AddHook(counter) })
		if first == nil {
			first = c
		}
		ls = append(ls, must(New(c, "ex", hotlimit.FixedWindow{Limit: limit, Window: time.Hour}, WithTimeout(time.Minute))))
		gs = append(gs, must(New(c, "gx", hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1_000_000}, WithTimeout(time.Minute))))
	}
	keys := make([]string, nKeys)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	s := slot(ls[0].RedisKey(keys[0]))
	src := nodeOf(t, first, ls[0].RedisKey(keys[0]))
	dst := addrs[0]
	if dst == src {
		dst = addrs[1]
	}
	step := reshard(t, addrs, s, src, dst)
	var admitted [nKeys]atomic.Int64
	var done atomic.Int64
	const total = instances * workers * perWorker
	var mu sync.Mutex
	var next atomic.Int64 // the decisions made when the next step is taken
	next.Store(total / 5)
	ctx := context.Background()
	var wg sync.WaitGroup
	for li, l := range ls {
		g := gs[li]
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perWorker {
					k := (w + i) % nKeys
					var d hotlimit.Decision
					var err error
					if i%2 == 0 {
						d, err = l.Allow(ctx, keys[k])
					} else {
						d, err = AllowLayers(ctx, Layer{g, keys[k], 1}, Layer{l, keys[k], 1})
					}
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						admitted[k].Add(1)
					}
					if n := done.Add(1); n >= next.Load() {
						mu.Lock()
						if n >= next.Load() && step() {
							next.Add(total / 5)
						}
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	for step() {
	}
	for k := range admitted {
		if n := admitted[k].Load(); n != limit {
			t.Errorf("key %d: %d admitted, want exactly %d", k, n, limit)
		}
	}
	if n := runs.Load(); n >= total {
		t.Errorf("%d decisions in %d script calls: not batched", total, n)
	}
	if got := nodeOf(t, first, ls[0].RedisKey(keys[0])); got != dst {
		redistest.WaitFor(t, "the slot map to follow the move", func() bool { return nodeOf(t, first, ls[0].RedisKey(keys[0])) == dst })
	}
	t.Logf("%d decisions in %d script calls", total, runs.Load())
}

// runCounter is a go-redis hook that counts script calls (EVALSHA and
// EVAL, not those answered NOSCRIPT).
type runCounter struct{ n *atomic.Int64 }

func (r *runCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *runCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (r *runCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && !redis.HasErrorPrefix(err, "NOSCRIPT") {
			r.n.Add(1)
		}
		return err
	}
}

// TestClusterBatchRefusedWhole: a batch a node refuses as a whole (here a
// script that does not compile, as Redis before 7.0 cannot compile the
// batch's flag) ran nothing: each of its decisions is sent again alone
// and decided, and the client's batching on the Cluster is turned off.
func TestClusterBatchRefusedWhole(t *testing.T) {
	c := redistest.ClusterClient(t, redistest.ClusterAddrs(t))
	ctx := context.Background()
	l := must(New(c, "rw", hotlimit.FixedWindow{Limit: 2, Window: time.Hour}, WithPrefix(redistest.Prefix(t)), WithTimeout(time.Minute)))
	saved := clusterBatchScript
	clusterBatchScript = newScript("return (")
	defer func() { clusterBatchScript = saved }()
	node := nodeOf(t, c, l.RedisKey("a"))
	_, other := keyInSlot(t, c, l, "b", slot(l.RedisKey("a")), node)
	rt := routerFor(c)
	ds, errs := forceBatch(t, rt.batcherFor(node), []context.Context{ctx, ctx, ctx}, Layer{l, "a", 1}, Layer{l, other, 1}, Layer{l, "a", 1})
	for i, d := range ds {
		if errs[i] != nil || !d.Allowed {
			t.Fatalf("decision %d of a batch refused whole: %+v, %v; want Redis's admission", i, d, errs[i])
		}
	}
	// Sent again by their callers, concurrently: the two on a in either
	// order.
	if ds[1].Remaining != 1 || ds[0].Remaining+ds[2].Remaining != 1 {
		t.Fatalf("Remaining %d, %d, %d; want 1 and 0 for a, 1 for the other key", ds[0].Remaining, ds[2].Remaining, ds[1].Remaining)
	}
	if !rt.noClusterBatch.Load() || rt.batcherFor(node) != nil {
		t.Fatal("batching on the Cluster is still on after a script that does not compile")
	}
	if d, err := l.Allow(ctx, "a"); err != nil || d.Allowed {
		t.Fatalf("the third decision on a, alone: %+v, %v; want Redis's denial", d, err)
	}
}
