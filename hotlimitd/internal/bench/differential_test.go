package bench_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit/hotlimitd/internal/bench"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var (
	diffSeed     = flag.Uint64("diff.seed", 0, "TestDifferentialRatelimit: run this seed alone (0: seeds 1 to -diff.seeds)")
	diffSeeds    = flag.Int("diff.seeds", 12, "TestDifferentialRatelimit: how many seeds")
	diffRequests = flag.Int("diff.requests", 300, "TestDifferentialRatelimit: requests a seed")
)

// TestDifferentialRatelimit runs hotlimitd's command and
// envoyproxy/ratelimit's service_cmd ($RATELIMIT_BIN, which ratelimit.sh
// installs) on one redis-server ($HOTLIMIT_REDIS_ADDR), each with the
// same generated configuration files, sends both the same generated
// requests one after another, and requires the same answer from both as
// far as the two count alike (compareLevel): the same gRPC error code, or
// for every descriptor the same current_limit (requests_per_unit, unit,
// name) or the same unlimited or no-limit answer; while no request of the
// domain has been refused, also the overall code and each descriptor's
// code, limit_remaining and duration_until_reset, its seconds within 1
// (hotlimitd's is exact, envoyproxy/ratelimit's whole seconds), and the
// limit headers both add (its LIMIT_RESPONSE_HEADERS_ENABLED, hotlimitd's
// -limit-headers).
//
// A seed makes 6 domain shapes (each loaded as 12 domains of the same
// rules, so that the requests of a shape go on to a fresh copy when one
// leaves step), each a random tree of rules in the language the two
// services share: exact values, key-only rules, wildcards (several
// at one level, overlapping), share_threshold, nested rules, limits of
// every unit from second to day and requests_per_unit from 0, unlimited
// limits, names and replaces,
// shadow_mode, detailed_metric and value_to_metric; each domain in a file of its own, some
// with comments, a leading "---" or a trailing empty document. Requests
// follow the rules most of the time and miss them otherwise (an unknown
// key or value, a descriptor longer or shorter than its rule, an unknown
// domain), with 1 to 3 descriptors, the request's hits_addend 0 to 3, a
// descriptor's own hits_addend (0 among its values) and its limit
// override.
//
// Left out, because hotlimitd differs on purpose (config's package doc
// says why): the files hotlimitd refuses, and a wildcard's match across
// keys (keys here have no "_"). A pair of requests is never sent within
// 300 ms of a minute's end or 20 ms of a second's, so that both services
// count it in the same window of every unit; a pair that straddles a
// second all the same (a slow answer) takes its domain out of step.
//
// Without $RATELIMIT_BIN and $HOTLIMIT_REDIS_ADDR it skips, unless
// $HOTLIMITD_DIFFERENTIAL is "required" (smoke.sh, which CI runs, sets
// it). A failure prints the seed: go test -run TestDifferentialRatelimit
// -diff.seed N reruns it alone.
func TestDifferentialRatelimit(t *testing.T) {
	rlBin, redisAddr := services(t)
	hlBin := buildHotlimitd(t)
	seeds := []uint64{*diffSeed}
	if *diffSeed == 0 {
		seeds = seeds[:0]
		for s := range *diffSeeds {
			seeds = append(seeds, uint64(s+1))
		}
	}
	run := time.Now().UnixNano() // domains of their own on a shared Redis
	for _, seed := range seeds {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			differential(t, seed, run, rlBin, hlBin, redisAddr)
		})
	}
}

// services returns $RATELIMIT_BIN and $HOTLIMIT_REDIS_ADDR, and skips t
// without them, unless $HOTLIMITD_DIFFERENTIAL is "required".
func services(t *testing.T) (rlBin, redisAddr string) {
	t.Helper()
	rlBin, redisAddr = os.Getenv("RATELIMIT_BIN"), os.Getenv("HOTLIMIT_REDIS_ADDR")
	if rlBin == "" || redisAddr == "" {
		if os.Getenv("HOTLIMITD_DIFFERENTIAL") == "required" {
			t.Fatal("HOTLIMITD_DIFFERENTIAL=required, but RATELIMIT_BIN or HOTLIMIT_REDIS_ADDR is not set")
		}
		t.Skip("needs RATELIMIT_BIN (ratelimit.sh) and HOTLIMIT_REDIS_ADDR")
	}
	return rlBin, redisAddr
}

// buildHotlimitd builds hotlimitd's command from the tree and returns
// its path.
func buildHotlimitd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hotlimitd")
	build := exec.Command("go", "build", "-o", bin, "github.com/hotlimit/hotlimit/hotlimitd/cmd/hotlimitd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build hotlimitd: %v\n%s", err, out)
	}
	return bin
}

func differential(t *testing.T, seed uint64, run int64, rlBin, hlBin, redisAddr string) {
	rng := rand.New(rand.NewPCG(seed, 0x6469666631))
	g := &gen{rng: rng}
	dir := t.TempDir()
	conf := filepath.Join(dir, "ratelimit", "config")
	hlConf := filepath.Join(dir, "hotlimitd")
	for _, d := range []string{conf, hlConf} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Each shape is loaded as diffCopies domains of the same rules (more
	// for a longer run): when one falls out of step (see inStep), the
	// requests of its shape go to the next.
	copies := diffCopies * max(1, *diffRequests/300)
	var shapes []*genShape
	files := map[string]string{}
	for i := range diffShapes {
		sh := g.domain()
		for c := range copies {
			name := fmt.Sprintf("diff-%d-%d-%d-%d", run, seed, i, c)
			sh.copies = append(sh.copies, name)
			text := g.file(name, sh.rules)
			files[name] = text
			for _, d := range []string{conf, hlConf} {
				if err := os.WriteFile(filepath.Join(d, name+".yaml"), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		shapes = append(shapes, sh)
	}

	rl := startRatelimitChild(t, rlBin, dir, redisAddr, run, seed)
	hl := startHotlimitdChild(t, hlBin, hlConf, redisAddr)
	outOfStep := map[string]bool{}
	var compared [3]int // requests compared for matching only, for codes, for codes and counts
	for n := range *diffRequests {
		sh := shapes[g.rng.IntN(len(shapes))]
		req := g.request(sh)
		awayFromWindowEnd()
		start := time.Now()
		want := ask(rl, req)
		got := ask(hl, req)
		// A pair that straddles a second may have been counted in two
		// windows of a second's limit: then the two count apart.
		sameSecond := start.Unix() == time.Now().Unix()
		level := compareMatch
		if !outOfStep[req.Domain] {
			level = compareCodes
			if sameSecond && inStep(want) && inStep(got) {
				level = compareCounts
			} else {
				outOfStep[req.Domain] = true
				if sh.cur < len(sh.copies)-1 {
					sh.cur++
				}
			}
		}
		compared[level]++
		if d := want.diff(got, level); d != "" {
			t.Fatalf("seed %d, request %d (compared: %s): %s\nrequest: %s\nenvoyproxy/ratelimit: %s\nhotlimitd:            %s\nthe domain's file:\n%s",
				seed, n, level, d, protojson.MarshalOptions{}.Format(req), want, got, files[req.Domain])
		}
	}
	t.Logf("seed %d: %d requests compared for matching only, %d for codes too, %d for counts too", seed, compared[0], compared[1], compared[2])
	if compared[compareCounts] < *diffRequests/10 {
		t.Errorf("seed %d: only %d of %d requests compared for counts: the generator refuses too often", seed, compared[compareCounts], *diffRequests)
	}
}

const (
	diffShapes = 6  // domain shapes a seed
	diffCopies = 12 // domains of each shape for 300 requests
)

// A compareLevel is how much of two answers must agree. The two services
// count differently on purpose (hotlimitd/doc.go): envoyproxy/ratelimit
// adds every descriptor's hits, refused or not, and reports each status
// after its own; hotlimitd decides the request's descriptors all or
// nothing, consumes nothing when it refuses, decides descriptors of one
// limit and key as one, and its duration_until_reset is the time until
// the limit admits one unit more. So their counts agree only while no
// request of a domain has been refused (inStep), and a status's count
// only when no other status of the request has its current_limit.
type compareLevel int

const (
	// compareMatch: the same error, or for every status the same
	// current_limit, or the same unlimited or no-limit answer.
	compareMatch compareLevel = iota
	// compareCodes: also the overall code, and the code of each status
	// whose current_limit is the request's only one.
	compareCodes
	// compareCounts: also such a status's limit_remaining, and its
	// duration_until_reset (within 1 s) when some of its limit is spent.
	compareCounts
)

func (l compareLevel) String() string {
	return [...]string{"matching", "matching and codes", "matching, codes and counts"}[l]
}

// inStep reports whether an answer leaves its domain's counts the same in
// both services: it refused nothing and spent no limit to 0.
func inStep(o outcome) bool {
	if o.err != "" {
		return false
	}
	for _, s := range o.statuses {
		if s.code != rlsv3.RateLimitResponse_OK || (s.limit != "" && s.remaining == 0) {
			return false
		}
	}
	return true
}

// awayFromWindowEnd sleeps past the end of the minute when it is less
// than 300 ms away, and past the end of the second when it is less than
// 20 ms away.
func awayFromWindowEnd() {
	now := time.Now()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < 300*time.Millisecond {
		time.Sleep(left + 50*time.Millisecond)
		return
	}
	if left := now.Truncate(time.Second).Add(time.Second).Sub(now); left < 20*time.Millisecond {
		time.Sleep(left + 5*time.Millisecond)
	}
}

// outcome is what the comparison reads of an answer.
type outcome struct {
	err      string // the gRPC code, "" for an answer
	overall  rlsv3.RateLimitResponse_Code
	statuses []statusOutcome
	headers  string                                  // response_headers_to_add, "name: value" each in order, joined by ", "
	limitHdr struct{ limit, remaining, reset int64 } // the three limit headers, -1 absent
}

type statusOutcome struct {
	code      rlsv3.RateLimitResponse_Code
	limit     string // "rpu/unit/name", "" without current_limit
	rpu       uint32
	remaining uint32
	reset     float64 // seconds, -1 unset
}

// class is what matching decided for s: its current_limit, or unlimited,
// or no limit.
func (s statusOutcome) class() string {
	switch {
	case s.limit != "":
		return s.limit
	case s.remaining == math.MaxUint32:
		return "unlimited"
	case s.remaining == 0:
		return "no limit"
	}
	return fmt.Sprintf("no current_limit, limit_remaining %d", s.remaining)
}

func (o outcome) String() string {
	if o.err != "" {
		return "error " + o.err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%v [", o.overall)
	for i, s := range o.statuses {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{%v limit=%q remaining=%d reset=%.3f}", s.code, s.limit, s.remaining, s.reset)
	}
	b.WriteString("]")
	if o.headers != "" {
		fmt.Fprintf(&b, " headers [%s]", o.headers)
	}
	return b.String()
}

// diff says how got (hotlimitd's) differs from o (envoyproxy/ratelimit's)
// at level, or "".
func (o outcome) diff(got outcome, level compareLevel) string {
	if o.err != got.err {
		return fmt.Sprintf("error %q, want %q", got.err, o.err)
	}
	if len(o.statuses) != len(got.statuses) {
		return fmt.Sprintf("%d statuses, want %d", len(got.statuses), len(o.statuses))
	}
	for i, w := range o.statuses {
		if g := got.statuses[i]; g.class() != w.class() {
			return fmt.Sprintf("status %d: %s, want %s", i, g.class(), w.class())
		}
	}
	if level < compareCodes {
		return ""
	}
	if o.overall != got.overall {
		return fmt.Sprintf("overall_code %v, want %v", got.overall, o.overall)
	}
	for i, w := range o.statuses {
		g := got.statuses[i]
		if w.limit != "" && o.sharing(w.limit) > 1 {
			continue // one limit and key, or several keys: not comparable
		}
		switch {
		case g.code != w.code:
			return fmt.Sprintf("status %d: code %v, want %v", i, g.code, w.code)
		case level < compareCounts:
		case g.remaining != w.remaining:
			return fmt.Sprintf("status %d: limit_remaining %d, want %d", i, g.remaining, w.remaining)
		case w.limit != "" && g.remaining < g.rpu && (g.reset < 0 || w.reset < 0 || math.Abs(math.Ceil(g.reset)-w.reset) > 1):
			return fmt.Sprintf("status %d: duration_until_reset %.3f s, want %.0f (-1: unset)", i, g.reset, w.reset)
		}
	}
	if level < compareCounts || o.anyShared() {
		return ""
	}
	// The limit headers (LIMIT_RESPONSE_HEADERS_ENABLED and -limit-headers)
	// of the status both pick among statuses that agree: the same one, so
	// the same values, the reset within 1 s and only once some of the
	// limit is spent (as for duration_until_reset above).
	wh, gh := o.limitHdr, got.limitHdr
	switch {
	case gh.limit != wh.limit || gh.remaining != wh.remaining:
		return fmt.Sprintf("headers [%s], want [%s]", got.headers, o.headers)
	case wh.remaining >= wh.limit:
	case gh.reset < 0 || wh.reset < 0 || gh.reset-wh.reset > 1 || wh.reset-gh.reset > 1:
		return fmt.Sprintf("headers [%s], want [%s] (the reset within 1 s)", got.headers, o.headers)
	}
	return ""
}

// anyShared reports whether two of o's statuses have one current_limit.
func (o outcome) anyShared() bool {
	for _, s := range o.statuses {
		if s.limit != "" && o.sharing(s.limit) > 1 {
			return true
		}
	}
	return false
}

// sharing returns how many of o's statuses have current_limit limit.
func (o outcome) sharing(limit string) int {
	n := 0
	for _, s := range o.statuses {
		if s.limit == limit {
			n++
		}
	}
	return n
}

func ask(c rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, req)
	if err != nil {
		return outcome{err: status.Code(err).String()}
	}
	o := outcome{overall: resp.GetOverallCode()}
	o.limitHdr.limit, o.limitHdr.remaining, o.limitHdr.reset = -1, -1, -1
	var hs []string
	for _, h := range resp.GetResponseHeadersToAdd() {
		hs = append(hs, h.GetKey()+": "+h.GetValue())
		v, err := strconv.ParseInt(h.GetValue(), 10, 64)
		if err != nil {
			v = -2 // not an integer: never equal
		}
		switch h.GetKey() {
		case "RateLimit-Limit":
			o.limitHdr.limit = v
		case "RateLimit-Remaining":
			o.limitHdr.remaining = v
		case "RateLimit-Reset":
			o.limitHdr.reset = v
		default:
			o.limitHdr.limit = -2 // a header neither service adds
		}
	}
	o.headers = strings.Join(hs, ", ")
	for _, s := range resp.GetStatuses() {
		so := statusOutcome{code: s.GetCode(), remaining: s.GetLimitRemaining(), reset: -1}
		if l := s.GetCurrentLimit(); l != nil {
			so.limit = fmt.Sprintf("%d/%v/%s", l.GetRequestsPerUnit(), l.GetUnit(), l.GetName())
			so.rpu = l.GetRequestsPerUnit()
		}
		if d := s.GetDurationUntilReset(); d != nil {
			so.reset = d.AsDuration().Seconds()
		}
		o.statuses = append(o.statuses, so)
	}
	return o
}

// startRatelimitChild starts envoyproxy/ratelimit on the files of
// dir/ratelimit/config and returns a client once it is healthy.
func startRatelimitChild(t *testing.T, bin, dir, redisAddr string, run int64, seed uint64) rlsv3.RateLimitServiceClient {
	logs := &tailWriter{t: t, name: "envoyproxy/ratelimit"}
	c := startChild(t, "envoyproxy/ratelimit", 3, func(ports []int) *exec.Cmd {
		child := exec.Command(bin)
		child.Env = append(os.Environ(), bench.RatelimitEnv(dir, redisAddr, fmt.Sprintf("diff:%d:%d:", run, seed), ports)...)
		child.Env = append(child.Env, "DISABLE_STATS=true", "LIMIT_RESPONSE_HEADERS_ENABLED=true")
		child.Stderr = logs
		return child
	})
	// It serves without a configuration it could not load: the
	// generator made a file outside the language both load.
	if logs.saw("Error loading new configuration") {
		t.Fatal("envoyproxy/ratelimit did not load the configuration (its log above says why)")
	}
	return c
}

// startHotlimitdChild starts hotlimitd's command on the files of conf and
// returns a client once it is healthy.
func startHotlimitdChild(t *testing.T, bin, conf, redisAddr string) rlsv3.RateLimitServiceClient {
	logs := &tailWriter{t: t, name: "hotlimitd"}
	return startChild(t, "hotlimitd", 2, func(ports []int) *exec.Cmd {
		child := exec.Command(bin, "-config", conf, "-backend", "redis", "-redis", redisAddr,
			"-grpc", "127.0.0.1:"+strconv.Itoa(ports[1]), "-http", "127.0.0.1:"+strconv.Itoa(ports[0]),
			"-reload-interval", "0", "-log-level", "warn", "-limit-headers")
		child.Stderr = logs
		return child
	})
}

// startChild starts the child that cmd makes for nPorts free loopback
// ports (its HTTP port first, its gRPC port second), to be killed when
// the test ends, and returns a client of its gRPC port once GET
// /healthcheck on its HTTP port answers 200. A child that exits first
// (another listener took a port between bench.LoopbackPorts' check and
// its bind) is started again on new ports, three times at most.
func startChild(t *testing.T, name string, nPorts int, cmd func(ports []int) *exec.Cmd) rlsv3.RateLimitServiceClient {
	t.Helper()
	for try := 1; ; try++ {
		ports, err := bench.LoopbackPorts(nPorts)
		if err != nil {
			t.Fatal(err)
		}
		child := cmd(ports)
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() {
			child.Wait()
			close(exited)
		}()
		t.Cleanup(func() {
			child.Process.Kill()
			<-exited
		})
		err = awaitHealth(exited, ports[0])
		if err == nil {
			conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(ports[1]), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			return rlsv3.NewRateLimitServiceClient(conn)
		}
		if !errors.Is(err, errExited) || try == 3 {
			t.Fatalf("%s (try %d): %v (its log above says why)", name, try, err)
		}
	}
}

var errExited = errors.New("exited before it was healthy")

// awaitHealth waits (at most 30 s) until GET
// http://127.0.0.1:httpPort/healthcheck answers 200.
func awaitHealth(exited <-chan struct{}, httpPort int) error {
	url := "http://127.0.0.1:" + strconv.Itoa(httpPort) + "/healthcheck"
	hc := &http.Client{Timeout: time.Second}
	for i := 0; ; i++ {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if i == 300 {
			return fmt.Errorf("%s not 200 after 30 s (last: %v)", url, err)
		}
		select {
		case <-exited:
			return errExited
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tailWriter logs a child's stderr through t, and keeps it for saw.
type tailWriter struct {
	t    *testing.T
	name string
	mu   sync.Mutex
	all  strings.Builder
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.all.Write(p)
	w.mu.Unlock()
	w.t.Logf("%s: %s", w.name, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// saw reports whether the child has written s.
func (w *tailWriter) saw(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Contains(w.all.String(), s)
}

// The generator.

var (
	genKeys   = []string{"k1", "k2", "k3"}
	genValues = []string{"a", "ab", "abc", "b", "b2"}
	genWild   = []string{"a*", "ab*", "b*", "*"}
	genUnits  = []string{"second", "minute", "hour", "day"}
	genRPU    = []uint32{0, 1, 2, 3, 5, 8, 20, 100}
)

type gen struct {
	rng *rand.Rand
}

func (g *gen) pick(p float64) bool { return g.rng.Float64() < p }

// A genShape is a domain's rules, loaded as several domains (copies);
// requests go to copies[cur].
type genShape struct {
	rules  []*genRule
	names  []string // its rate_limits' names
	copies []string
	cur    int
}

type genRule struct {
	key, value       string // value "": key only
	limit            *genLimit
	shadow, detailed bool
	share            bool
	valueToMetric    bool
	children         []*genRule
}

type genLimit struct {
	unit      string
	rpu       uint32
	unlimited bool
	name      string
	replaces  []string
}

func (g *gen) domain() *genShape {
	d := &genShape{}
	var limits []*genLimit
	d.rules = g.level(0, d, &limits)
	for _, l := range limits {
		if len(d.names) > 0 && g.pick(0.25) {
			for range 1 + g.rng.IntN(2) {
				// Neither service loads a limit that replaces its own name.
				if n := d.names[g.rng.IntN(len(d.names))]; n != l.name && !slices.Contains(l.replaces, n) {
					l.replaces = append(l.replaces, n)
				}
			}
		}
	}
	return d
}

func (g *gen) level(depth int, d *genShape, limits *[]*genLimit) []*genRule {
	var rules []*genRule
	seen := map[string]bool{}
	for range 1 + g.rng.IntN(3) {
		r := &genRule{key: genKeys[g.rng.IntN(len(genKeys))]}
		switch x := g.rng.Float64(); {
		case x < 0.45:
			r.value = genValues[g.rng.IntN(len(genValues))]
		case x < 0.75:
		default:
			r.value = genWild[g.rng.IntN(len(genWild))]
			r.share = g.pick(0.4)
		}
		if seen[r.key+"\x00"+r.value] {
			continue
		}
		seen[r.key+"\x00"+r.value] = true
		leaf := depth == 2 || g.pick(0.5)
		if !leaf {
			r.children = g.level(depth+1, d, limits)
		}
		if (leaf && g.pick(0.9)) || (!leaf && g.pick(0.4)) {
			r.limit = g.limit(d)
			*limits = append(*limits, r.limit)
			r.shadow = g.pick(0.15)
			r.detailed = g.pick(0.1)
		}
		r.valueToMetric = g.pick(0.1)
		rules = append(rules, r)
	}
	return rules
}

func (g *gen) limit(d *genShape) *genLimit {
	l := &genLimit{}
	if g.pick(0.1) {
		l.unlimited = true
	} else {
		l.unit = genUnits[g.rng.IntN(len(genUnits))]
		l.rpu = genRPU[g.rng.IntN(len(genRPU))]
	}
	if g.pick(0.4) {
		l.name = "n" + strconv.Itoa(len(d.names))
		d.names = append(d.names, l.name)
	}
	return l
}

// file writes rules as domain name's file.
func (g *gen) file(name string, rules []*genRule) string {
	var b strings.Builder
	if g.pick(0.2) {
		b.WriteString("# generated\n")
	}
	if g.pick(0.2) {
		b.WriteString("---\n")
	}
	fmt.Fprintf(&b, "domain: %q\ndescriptors:\n", name)
	writeRules(&b, rules, "  ")
	if g.pick(0.2) {
		b.WriteString("---\n")
	}
	return b.String()
}

func writeRules(b *strings.Builder, rules []*genRule, indent string) {
	for _, r := range rules {
		fmt.Fprintf(b, "%s- key: %q\n", indent, r.key)
		in := indent + "  "
		if r.value != "" {
			fmt.Fprintf(b, "%svalue: %q\n", in, r.value)
		}
		if r.share {
			fmt.Fprintf(b, "%sshare_threshold: true\n", in)
		}
		if l := r.limit; l != nil {
			fmt.Fprintf(b, "%srate_limit:\n", in)
			if l.unlimited {
				fmt.Fprintf(b, "%s  unlimited: true\n", in)
			} else {
				fmt.Fprintf(b, "%s  unit: %s\n%s  requests_per_unit: %d\n", in, l.unit, in, l.rpu)
			}
			if l.name != "" {
				fmt.Fprintf(b, "%s  name: %q\n", in, l.name)
			}
			if len(l.replaces) > 0 {
				fmt.Fprintf(b, "%s  replaces:\n", in)
				for _, n := range l.replaces {
					fmt.Fprintf(b, "%s    - name: %q\n", in, n)
				}
			}
			if r.shadow {
				fmt.Fprintf(b, "%sshadow_mode: true\n", in)
			}
			if r.detailed {
				fmt.Fprintf(b, "%sdetailed_metric: true\n", in)
			}
		}
		if r.valueToMetric {
			fmt.Fprintf(b, "%svalue_to_metric: true\n", in)
		}
		if len(r.children) > 0 {
			fmt.Fprintf(b, "%sdescriptors:\n", in)
			writeRules(b, r.children, in)
		}
	}
}

func (g *gen) request(d *genShape) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: d.copies[d.cur], HitsAddend: []uint32{0, 1, 1, 1, 2, 3}[g.rng.IntN(6)]}
	if g.pick(0.02) {
		req.Domain = "diff-unknown"
	}
	for range 1 + g.rng.IntN(3) {
		desc := &commonrl.RateLimitDescriptor{}
		rules := d.rules
		for {
			var e *commonrl.RateLimitDescriptor_Entry
			var next []*genRule
			if len(rules) > 0 && g.pick(0.85) {
				r := rules[g.rng.IntN(len(rules))]
				e = &commonrl.RateLimitDescriptor_Entry{Key: r.key, Value: g.valueFor(r)}
				next = r.children
			} else {
				e = &commonrl.RateLimitDescriptor_Entry{Key: genKeys[g.rng.IntN(len(genKeys))], Value: genValues[g.rng.IntN(len(genValues))]}
			}
			desc.Entries = append(desc.Entries, e)
			if len(desc.Entries) == 4 || !((len(next) > 0 && g.pick(0.7)) || g.pick(0.05)) {
				break
			}
			rules = next
		}
		if g.pick(0.15) {
			desc.HitsAddend = wrapperspb.UInt64([]uint64{0, 1, 2}[g.rng.IntN(3)])
		}
		if g.pick(0.05) {
			// An override's count is its descriptor's in
			// envoyproxy/ratelimit, whatever the limit, and the
			// override's own in hotlimitd (doc.go says why): its
			// descriptor here is the override's alone.
			o := &commonrl.RateLimitDescriptor_RateLimitOverride{
				RequestsPerUnit: []uint32{0, 1, 3}[g.rng.IntN(3)],
				Unit:            []typev3.RateLimitUnit{typev3.RateLimitUnit_SECOND, typev3.RateLimitUnit_MINUTE, typev3.RateLimitUnit_HOUR, typev3.RateLimitUnit_DAY}[g.rng.IntN(4)],
			}
			desc.Limit = o
			desc.Entries = []*commonrl.RateLimitDescriptor_Entry{{Key: "ko", Value: fmt.Sprintf("%d-%v", o.RequestsPerUnit, o.Unit)}}
		}
		req.Descriptors = append(req.Descriptors, desc)
	}
	return req
}

// valueFor returns a value that r matches, or now and then one it may
// not.
func (g *gen) valueFor(r *genRule) string {
	switch {
	case g.pick(0.1):
		return genValues[g.rng.IntN(len(genValues))]
	case r.value == "":
		return append(slices.Clone(genValues), "zz")[g.rng.IntN(len(genValues)+1)]
	case strings.HasSuffix(r.value, "*"):
		return strings.TrimSuffix(r.value, "*") + []string{"", "x", "b", "c9"}[g.rng.IntN(4)]
	default:
		return r.value
	}
}

// TestDocumentsAfterTheFirst checks the one difference of reading that
// config's package doc gives for a file both services load: of a file of
// two YAML documents, envoyproxy/ratelimit loads the first only (the
// second's domain has no limit there), and hotlimitd loads both.
func TestDocumentsAfterTheFirst(t *testing.T) {
	rlBin, redisAddr := services(t)
	hlBin := buildHotlimitd(t)
	run := time.Now().UnixNano()
	first, second := fmt.Sprintf("docs-%d-first", run), fmt.Sprintf("docs-%d-second", run)
	text := fmt.Sprintf("domain: %s\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"+
		"---\ndomain: %s\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 7}\n", first, second)
	dir := t.TempDir()
	conf, hlConf := filepath.Join(dir, "ratelimit", "config"), filepath.Join(dir, "hotlimitd")
	for _, d := range []string{conf, hlConf} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "two.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rl := startRatelimitChild(t, rlBin, dir, redisAddr, run, 0)
	hl := startHotlimitdChild(t, hlBin, hlConf, redisAddr)
	for _, c := range []struct {
		name   string
		client rlsv3.RateLimitServiceClient
		domain string
		limit  string // the status's current_limit, "" for none
	}{
		{"envoyproxy/ratelimit", rl, first, "5/MINUTE/"},
		{"envoyproxy/ratelimit", rl, second, ""},
		{"hotlimitd", hl, first, "5/MINUTE/"},
		{"hotlimitd", hl, second, "7/HOUR/"},
	} {
		req := &rlsv3.RateLimitRequest{Domain: c.domain, HitsAddend: 1, Descriptors: []*commonrl.RateLimitDescriptor{
			{Entries: []*commonrl.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}},
		}}
		o := ask(c.client, req)
		if o.err != "" || o.overall != rlsv3.RateLimitResponse_OK || len(o.statuses) != 1 || o.statuses[0].limit != c.limit {
			t.Errorf("%s, the file's %s document: %v, want OK with current_limit %q", c.name, c.domain, o, c.limit)
		}
	}
}
