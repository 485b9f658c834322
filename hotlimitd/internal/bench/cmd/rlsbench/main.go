// Command rlsbench measures one rate limit service under a gRPC load on
// loopback: it starts the service in a child process of its own (so the
// service's CPU is measured apart from the load's), puts the load on it
// with hotlimitd/internal/bench's generator, and prints one line in the format of
// go test -bench, which benchstat reads:
//
//	BenchmarkRLS/system=S/backend=B/alg=A/desc=D  N  ns/op  decisions/s  p50-µs  p99-µs  p999-µs  over-%  cpu-µs/op  errors
//
// N is the requests answered; ns/op is the run's time per answered
// request (the inverse of decisions/s, for benchstat's ratios); errors
// counts the calls that failed (a backend timeout under load: never a
// decision; more than -max-errors end the run); cpu-µs/op is the service
// process's CPU time (user and system, from /proc) per answered request,
// plus the Redis server's (INFO cpu) for the Redis and lease backends. A
// request is one decision, whatever its number of descriptors. Lines
// starting with # say what the machine was doing (/proc/loadavg before
// and after).
//
// The systems:
//   - -system hotlimitd: hotlimitd's Server (package hotlimitd) on a
//     grpc.Server in the child, on a hotlimitd/backend Store of -backend
//     local (one replica, exact), redis (exact across replicas) or lease
//     (never admits more than the shared budget; can refuse while other
//     replicas hold leased units). Its configuration is
//     hotlimitd/internal/bench.Config; its process collects garbage and
//     serves gRPC as cmd/hotlimitd's does, with -gc-heap-floor and
//     -grpc-stream-workers (the same flags, the same defaults).
//   - -system gubernator: gubernator v2.13.0's daemon (SpawnDaemon, as its
//     cmd/gubernator runs it), one node owning every key, with
//     -behavior no_batching, batching or global on every rate limit.
//   - -system ratelimit: envoyproxy/ratelimit's service (-ratelimit-bin,
//     its service_cmd; ratelimit.sh installs the pinned version) on the
//     Redis of -redis, with the same configuration file as hotlimitd (fixed
//     windows only: -alg window), its local cache of over-limit keys
//     (-ratelimit-cache) and its stats to Prometheus or off
//     (-ratelimit-stats).
//
// -over-keys N sends the keys below N under a rule of 1 an hour
// (bench.OverKey): with keys uniform, N/-keys of the descriptors are over
// the limit. -pause-redis D stops the Redis server for D a third into the
// measured part (SIGSTOP, then SIGCONT): its failed calls are the errors
// column.
//
// Usage (run.sh runs the comparison):
//
//	rlsbench -system hotlimitd -backend redis -redis 127.0.0.1:6379 -alg bucket -desc 1
//	rlsbench -system gubernator -behavior no_batching -alg window -desc 3
//	rlsbench -system ratelimit -ratelimit-bin service_cmd -redis 127.0.0.1:6379 -alg window -desc 3
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	guber "github.com/gubernator-io/gubernator/v2"
	"github.com/hotlimit/hotlimit/hotlimitd/internal/bench"
	"github.com/hotlimit/hotlimit/hotlimitd/internal/defaults"
	"github.com/hotlimit/hotlimit/hotlimitd/internal/heapfloor"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
)

type flags struct {
	serve    bool
	system   string
	backend  string
	behavior string
	alg      string
	limit    int64
	unit     string
	desc     int
	keys     int
	callers  int
	conns    int
	duration time.Duration
	warmup   time.Duration
	requests int64
	redis    string
	seed     uint64
	maxErrs  int64

	redisTimeout time.Duration
	localDenials int
	cpuProfile   string
	memProfile   string
	replicas     int
	over         int
	pause        time.Duration

	ratelimitBin    string
	ratelimitCache  int
	ratelimitWindow time.Duration
	ratelimitStats  string

	gcHeapFloor   heapfloor.Size
	streamWorkers int
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.serve, "serve", false, "run the service only, print its address and serve until standard input closes (rlsbench's child)")
	fs.StringVar(&f.system, "system", "hotlimitd", "the service: hotlimitd, gubernator or ratelimit (envoyproxy/ratelimit, on Redis)")
	fs.StringVar(&f.backend, "backend", "local", "hotlimitd's backend: local, redis or lease")
	fs.StringVar(&f.behavior, "behavior", "no_batching", "gubernator's behavior on every rate limit: no_batching, batching or global")
	fs.StringVar(&f.alg, "alg", "bucket", "bucket (hotlimit's token_bucket, gubernator's LEAKY_BUCKET) or window (hotlimit's fixed_window, gubernator's TOKEN_BUCKET)")
	fs.Int64Var(&f.limit, "limit", 1000, "requests per unit of each key (and a bucket's capacity)")
	fs.StringVar(&f.unit, "unit", "second", "the limit's unit: second, minute, hour or day")
	fs.IntVar(&f.desc, "desc", 1, "descriptors (gubernator: rate limits) per request")
	fs.IntVar(&f.keys, "keys", 1000, "key space: each descriptor's key is uniform among this many")
	fs.IntVar(&f.callers, "callers", 32, "concurrent callers, each with one request in flight")
	fs.IntVar(&f.conns, "conns", 4, "gRPC connections the callers share")
	fs.DurationVar(&f.duration, "duration", 5*time.Second, "measured time (0: -requests only)")
	fs.DurationVar(&f.warmup, "warmup", time.Second, "unmeasured load before")
	fs.Int64Var(&f.requests, "requests", 0, "measured requests (0: -duration only)")
	fs.StringVar(&f.redis, "redis", "", "Redis address (host:port) of the redis and lease backends")
	fs.DurationVar(&f.redisTimeout, "redis-timeout", 2*time.Second, "bound of each Redis call of the redis and lease backends (cmd/hotlimitd's default)")
	fs.IntVar(&f.localDenials, "local-denials", 0, "hotlimitd's redis backend: keys per limit whose denial it remembers (cmd/hotlimitd's -redis-local-denials; 0: off)")
	fs.IntVar(&f.over, "over-keys", 0, "the keys of index below this are over the limit: sent under their rule of 1 an hour (bench.OverKey), so with keys uniform over-keys/keys of the descriptors are refused")
	fs.DurationVar(&f.pause, "pause-redis", 0, "stop the Redis server (SIGSTOP) this long, then SIGCONT, a third of the way into the measured part (0: never)")
	fs.StringVar(&f.ratelimitBin, "ratelimit-bin", "service_cmd", "envoyproxy/ratelimit's service_cmd (run.sh installs it)")
	fs.IntVar(&f.ratelimitCache, "ratelimit-cache", 4<<20, "envoyproxy/ratelimit's LOCAL_CACHE_SIZE_IN_BYTES: its cache of over-limit keys (0: off)")
	fs.DurationVar(&f.ratelimitWindow, "ratelimit-window", 150*time.Microsecond, "envoyproxy/ratelimit's REDIS_PIPELINE_WINDOW")
	fs.StringVar(&f.ratelimitStats, "ratelimit-stats", "prometheus", "envoyproxy/ratelimit's stats: prometheus (USE_PROMETHEUS, as hotlimitd's promlimit metrics) or off (DISABLE_STATS)")
	fs.IntVar(&f.replicas, "replicas", 1, "replicas of the service in its process (each its own port; the callers' connections spread over them): gubernator nodes that are each other's peers, or hotlimitd Servers on one Redis")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write the service's CPU profile (warmup included) to this file")
	fs.StringVar(&f.memProfile, "memprofile", "", "write the service's allocation profile (pprof's allocs, warmup included, every allocation recorded: slower) to this file when it stops")
	f.gcHeapFloor = heapfloor.Default
	fs.IntVar(&f.streamWorkers, "grpc-stream-workers", defaults.StreamWorkers, "hotlimitd: its gRPC server's stream workers, as cmd/hotlimitd's -grpc-stream-workers (0: a goroutine a request)")
	fs.Var(&f.gcHeapFloor, "gc-heap-floor", "hotlimitd: its process's -gc-heap-floor, as cmd/hotlimitd's (`bytes`, 0: off; off when GOGC is set)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the callers' key streams")
	fs.Int64Var(&f.maxErrs, "max-errors", 1000, "failed calls the run survives (counted apart, never as decisions); one more ends it")
}

func main() {
	var f flags
	f.register(flag.CommandLine)
	flag.Parse()
	if err := f.check(); err != nil {
		fmt.Fprintln(os.Stderr, "rlsbench:", err)
		os.Exit(2)
	}
	var err error
	if f.serve {
		err = serve(&f)
	} else {
		err = measure(&f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlsbench:", err)
		os.Exit(1)
	}
}

func (f *flags) check() error {
	if _, err := bench.ParseAlgorithm(f.alg); err != nil {
		return err
	}
	if _, ok := bench.Units[f.unit]; !ok {
		return fmt.Errorf("unknown -unit %q (want second, minute, hour or day)", f.unit)
	}
	if err := f.checkSystem(); err != nil {
		return err
	}
	if f.pause > 0 && !f.onRedis() {
		return errors.New("-pause-redis needs a system on Redis")
	}
	if f.over < 0 || f.over > f.keys {
		return fmt.Errorf("-over-keys must be in [0, -keys], got %d", f.over)
	}
	if f.limit <= 0 || f.limit > 1<<32-1 {
		return fmt.Errorf("-limit must be in [1, 4294967295], got %d", f.limit)
	}
	if err := defaults.CheckStreamWorkers(f.streamWorkers); err != nil {
		return err
	}
	if f.conns <= 0 {
		return fmt.Errorf("-conns must be > 0, got %d", f.conns)
	}
	if f.replicas < 1 || f.replicas > f.conns {
		return fmt.Errorf("-replicas must be in [1, -conns], got %d", f.replicas)
	}
	if f.replicas > 1 && f.system == "hotlimitd" && f.backend == "local" {
		return errors.New("-replicas > 1 needs a shared backend (-backend redis or lease): local replicas would each keep their own limits")
	}
	return nil // the load's own options are checked by bench.Run
}

// checkSystem checks -system and the flags of that system.
func (f *flags) checkSystem() error {
	switch f.system {
	case "hotlimitd":
		switch f.backend {
		case "local":
		case "redis", "lease":
			if f.redis == "" {
				return fmt.Errorf("-backend %s needs -redis host:port", f.backend)
			}
		default:
			return fmt.Errorf("unknown -backend %q (want local, redis or lease)", f.backend)
		}
	case "gubernator":
		if _, err := behavior(f.behavior); err != nil {
			return err
		}
	case "ratelimit":
		if f.redis == "" || f.replicas != 1 {
			return errors.New("-system ratelimit needs -redis host:port, and one replica")
		}
	default:
		return fmt.Errorf("unknown -system %q (want hotlimitd, gubernator or ratelimit)", f.system)
	}
	if f.localDenials != 0 && (f.system != "hotlimitd" || f.backend != "redis" || f.localDenials < 0) {
		return fmt.Errorf("-local-denials %d: for -system hotlimitd -backend redis, and 0 or more", f.localDenials)
	}
	return nil
}

func behavior(s string) (guber.Behavior, error) {
	switch s {
	case "no_batching":
		return guber.Behavior_NO_BATCHING, nil
	case "batching":
		return guber.Behavior_BATCHING, nil
	case "global":
		return guber.Behavior_GLOBAL, nil
	}
	return 0, fmt.Errorf("unknown -behavior %q (want no_batching, batching or global)", s)
}

// onRedis reports whether the system measured keeps its state in Redis.
func (f *flags) onRedis() bool {
	return f.system == "ratelimit" || f.system == "hotlimitd" && f.backend != "local"
}

// name is the benchmark's name: what was measured.
func (f *flags) name() string {
	mode := f.backend
	switch f.system {
	case "gubernator":
		mode = f.behavior
	case "ratelimit":
		mode = "redis/stats=" + f.ratelimitStats
	}
	name := fmt.Sprintf("BenchmarkRLS/system=%s/backend=%s/alg=%s/desc=%d/callers=%d", f.system, mode, f.alg, f.desc, f.callers)
	if f.localDenials > 0 {
		name += fmt.Sprintf("/denials=%d", f.localDenials)
	}
	if f.over > 0 {
		name += fmt.Sprintf("/over=%d", f.over)
	}
	if f.pause > 0 {
		name += fmt.Sprintf("/pause=%v", f.pause)
	}
	if f.replicas > 1 {
		name += fmt.Sprintf("/replicas=%d", f.replicas)
	}
	return name
}

// serve runs the service until standard input closes (the parent exits
// or closes it) or a signal comes, after printing its address.
func serve(f *flags) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var (
		addrs    []string
		shutdown func()
		err      error
	)
	if f.system == "gubernator" {
		var ds []*guber.Daemon
		if ds, addrs, err = bench.StartGubernatorCluster(ctx, f.replicas, 0); err == nil {
			shutdown = func() {
				for _, d := range ds {
					d.Close()
				}
			}
		}
	} else {
		if _, set := heapfloor.UserGOGC(); !set {
			stopFloor, _ := heapfloor.Start(uint64(f.gcHeapFloor)) // as cmd/hotlimitd
			defer stopFloor()
		}
		addrs, shutdown, err = serveHotlimitd(ctx, f)
	}
	if err != nil {
		return err
	}
	defer shutdown()
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if f.memProfile != "" {
		runtime.MemProfileRate = 1 // every allocation: exact counts, slower
		defer writeAllocs(f.memProfile)
	}
	fmt.Println(strings.Join(addrs, ","))
	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-ctx.Done():
	case <-eof:
	}
	return nil
}

// listen serves g on a free loopback port until ctx ends.
func listen(ctx context.Context, g *grpc.Server) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go g.Serve(ln)
	context.AfterFunc(ctx, g.Stop)
	return ln.Addr().String(), nil
}

// measure starts the service in a child process, measures, and prints
// the result line.
func measure(f *flags) error {
	child, addrs, stop, err := start(f)
	if err != nil {
		return err
	}
	defer stop()

	conns, err := bench.Dial(f.conns, addrs...)
	if err != nil {
		return err
	}
	defer bench.Close(conns)
	var rc *redis.Client
	if f.onRedis() {
		rc = redis.NewClient(&redis.Options{Addr: f.redis})
		defer rc.Close()
	}
	o := bench.Options{
		Callers: f.callers, Requests: f.requests, Duration: f.duration, Warmup: f.warmup,
		Keys: f.keys, Descriptors: f.desc, Seed: f.seed, MaxErrors: f.maxErrs,
	}
	// The service's CPU time over exactly the measured part.
	var cpu [2]time.Duration
	var cpuErr error
	pause := func() {}
	o.Phase = func(measuring bool) {
		d, err := cpuTime(child.Process.Pid, rc)
		cpuErr = errors.Join(cpuErr, err)
		if measuring {
			cpu[0] = d
			if f.pause > 0 {
				pause, err = pauseRedis(rc, f.duration/3, f.pause)
				cpuErr = errors.Join(cpuErr, err)
			}
		} else {
			cpu[1] = d
		}
	}
	fmt.Printf("# loadavg before: %s", loadavg())
	res, err := bench.Run(context.Background(), target(f, conns), o)
	pause()
	if err != nil {
		return err
	}
	if cpuErr != nil {
		return cpuErr
	}
	fmt.Printf("# loadavg after: %s", loadavg())
	n := res.Requests
	fmt.Printf("%s-%d\t%d\t%.0f ns/op\t%.0f decisions/s\t%d p50-µs\t%d p99-µs\t%d p999-µs\t%.2f over-%%\t%.2f cpu-µs/op\t%d errors\n",
		f.name(), runtime.GOMAXPROCS(0), n, float64(res.Elapsed.Nanoseconds())/float64(n), res.PerSecond(),
		res.Quantile(0.5).Microseconds(), res.Quantile(0.99).Microseconds(), res.Quantile(0.999).Microseconds(),
		100*float64(res.Over)/float64(n), float64((cpu[1]-cpu[0]).Nanoseconds())/1e3/float64(n), res.Errors)
	return nil
}

// target returns the load's Target for f's system, over conns.
func target(f *flags, conns []*grpc.ClientConn) bench.Target {
	keys := bench.KeyNames(f.keys)
	if f.system == "gubernator" {
		b, _ := behavior(f.behavior)
		alg, _ := bench.ParseAlgorithm(f.alg)
		return &bench.Gubernator{Conns: conns, Keys: keys, Algorithm: alg, Limit: f.limit, Period: bench.Units[f.unit], Behavior: b, Over: f.over}
	}
	return &bench.RLS{Conns: conns, Keys: keys, Over: f.over}
}

// start starts the service in a child process: envoyproxy/ratelimit's
// own, or this command with -serve. It returns the child, the service's
// addresses, and what stops it.
func start(f *flags) (*exec.Cmd, []string, func(), error) {
	if f.system == "ratelimit" {
		dir, err := os.MkdirTemp("", "rlsbench-ratelimit-")
		if err != nil {
			return nil, nil, nil, err
		}
		child, addr, err := startRatelimit(f, dir)
		if err != nil {
			os.RemoveAll(dir)
			return nil, nil, nil, err
		}
		return child, []string{addr}, func() {
			child.Process.Signal(syscall.SIGTERM)
			if err := waitOrKill(child, 10*time.Second); err != nil && !isSignaled(err) {
				fmt.Fprintln(os.Stderr, "rlsbench: envoyproxy/ratelimit:", err)
			}
			os.RemoveAll(dir)
		}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, nil, err
	}
	child := exec.Command(exe, append([]string{"-serve"}, os.Args[1:]...)...)
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := child.Start(); err != nil {
		return nil, nil, nil, err
	}
	stop := func() {
		stdin.Close()
		if err := waitOrKill(child, 10*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "rlsbench: the service:", err)
		}
	}
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return nil, nil, nil, fmt.Errorf("the service printed no address: %w", err)
	}
	return child, strings.Split(strings.TrimSpace(addr), ","), stop, nil
}

// isSignaled reports whether err is a child's exit on a signal (SIGTERM's
// default action), not a failure.
func isSignaled(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws, ok := ee.Sys().(syscall.WaitStatus)
		return ok && ws.Signaled()
	}
	return false
}

// pauseRedis stops the Redis server rc talks to (SIGSTOP) after the
// delay, for pause, then resumes it (SIGCONT), printing a comment line
// when it did. The function it returns waits for the resume (and resumes
// at once if the pause has not ended): call it before reading a result.
func pauseRedis(rc *redis.Client, after, pause time.Duration) (func(), error) {
	info, err := rc.Info(context.Background(), "server").Result()
	pid := infoInt(info, "process_id")
	if err != nil || pid <= 0 {
		return func() {}, fmt.Errorf("-pause-redis: no Redis process id (INFO server: %v)", err)
	}
	done := make(chan struct{})
	resume := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-time.After(after):
		case <-resume:
			return
		}
		t0 := time.Now()
		syscall.Kill(pid, syscall.SIGSTOP)
		select {
		case <-time.After(pause):
		case <-resume:
		}
		syscall.Kill(pid, syscall.SIGCONT)
		fmt.Printf("# paused redis-server (pid %d) for %v, %v after the measured part began\n", pid, time.Since(t0).Round(time.Millisecond), after)
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(resume) })
		<-done
	}, nil
}

// infoInt returns the integer field key of an INFO reply, or -1.
func infoInt(info, key string) int {
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == key {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return -1
}

// writeAllocs writes the allocation profile to path, or says why not.
func writeAllocs(path string) {
	pf, err := os.Create(path)
	if err == nil {
		err = errors.Join(pprof.Lookup("allocs").WriteTo(pf, 0), pf.Close())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlsbench: -memprofile:", err)
	}
}

func waitOrKill(c *exec.Cmd, grace time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
		c.Process.Kill()
		return errors.Join(errors.New("did not exit; killed"), <-done)
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown\n"
	}
	return string(b)
}

// cpuTime returns the CPU time (user + system) of process pid so far,
// plus the Redis server's when rc is not nil.
func cpuTime(pid int, rc *redis.Client) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces, in
	// parentheses): state is field 3; utime and stime are 14 and 15, in
	// clock ticks.
	s := string(b)
	fs := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fs) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fs))
	}
	ut, err1 := strconv.ParseInt(fs[11], 10, 64)
	st, err2 := strconv.ParseInt(fs[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	d := time.Duration(ut+st) * time.Second / clockTicks
	if rc != nil {
		info, err := rc.Info(context.Background(), "cpu").Result()
		if err != nil {
			return 0, err
		}
		d += redisCPU(info)
	}
	return d, nil
}

// clockTicks is USER_HZ, the unit of /proc's times: 100 on every Linux
// architecture Go runs on.
const clockTicks = 100

// redisCPU returns used_cpu_sys + used_cpu_user of INFO cpu's reply.
func redisCPU(info string) time.Duration {
	var d time.Duration
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			if s, err := strconv.ParseFloat(v, 64); err == nil {
				d += time.Duration(s * float64(time.Second))
			}
		}
	}
	return d
}
