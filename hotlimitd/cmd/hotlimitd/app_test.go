package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) {
	if os.Getenv(runMain) == "1" { // a child process of command
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"hotlimitd"}, os.Args[i+1:]...)
				break
			}
		}
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// running is a hotlimitd started by a test.
type running struct {
	a       *app
	sigs    chan os.Signal
	done    chan error
	handled chan os.Signal
	logs    *syncBuffer
	conn    *grpc.ClientConn
	rls     rlsv3.RateLimitServiceClient
}

// startCmd runs the command with args (listening on 127.0.0.1:0) and
// returns once it serves. h may be nil.
func startCmd(t *testing.T, h *hooks, args ...string) *running {
	t.Helper()
	if h == nil {
		h = &hooks{}
	}
	r := &running{sigs: make(chan os.Signal, 1), done: make(chan error, 1), handled: make(chan os.Signal, 1), logs: &syncBuffer{}}
	started := make(chan *app, 1)
	h.started = func(a *app) { started <- a }
	h.handled = func(s os.Signal) { r.handled <- s }
	args = append([]string{"-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0", "-shutdown-grace", "1m"}, args...)
	go func() { r.done <- run(context.Background(), args, io.Discard, r.logs, r.sigs, h) }()
	select {
	case r.a = <-started:
	case err := <-r.done:
		t.Fatalf("run: %v", err)
	}
	conn, err := grpc.NewClient(r.a.grpcLis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.conn, r.rls = conn, rlsv3.NewRateLimitServiceClient(conn)
	t.Cleanup(func() {
		conn.Close()
		if r.a != nil {
			r.stop(t)
		}
	})
	return r
}

// stop sends SIGTERM and waits for run to return.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.sigs <- syscall.SIGTERM
	if err := <-r.done; err != nil {
		t.Errorf("run: %v", err)
	}
	r.a = nil
}

// hup sends SIGHUP and waits until it was handled.
func (r *running) hup() {
	r.sigs <- syscall.SIGHUP
	<-r.handled
}

func (r *running) ask(t *testing.T, domain string, kv ...string) *rlsv3.RateLimitResponse {
	t.Helper()
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	resp, err := r.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*rlv3.RateLimitDescriptor{d}})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

func (r *running) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.a.httpLis.Addr().String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// metric returns the line of /metrics that starts with prefix.
func (r *running) metric(t *testing.T, prefix string) string {
	t.Helper()
	_, body := r.get(t, "/metrics")
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no metric %s in /metrics", prefix)
	return ""
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDefaults: without flags but the addresses, hotlimitd serves the
// built-in configuration in process, reports health, and counts.
func TestDefaults(t *testing.T) {
	r := startCmd(t, nil)
	resp := r.ask(t, "hotlimitd", "generic_key", "a")
	st := resp.Statuses[0]
	if resp.OverallCode != rlsv3.RateLimitResponse_OK || st.CurrentLimit.GetRequestsPerUnit() != 100 || st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_SECOND {
		t.Fatalf("built-in generic_key: %v", resp)
	}
	hc, err := healthpb.NewHealthClient(r.conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: rlsv3.RateLimitService_ServiceDesc.ServiceName})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v, %v", hc, err)
	}
	if code, body := r.get(t, "/healthcheck"); code != 200 || body != "OK" {
		t.Fatalf("/healthcheck: %d %q", code, body)
	}
	if got := r.metric(t, `hotlimitd_requests_total{code="ok"}`); got != `hotlimitd_requests_total{code="ok"} 1` {
		t.Fatalf("metric %q", got)
	}
	if got := r.metric(t, `hotlimit_backend_duration_seconds_count{limit=`); !strings.HasSuffix(got, " 1") {
		t.Fatalf("metric %q", got)
	}
}

// TestPrintConfig: -print-config prints the built-in configuration.
func TestPrintConfig(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-print-config"}, &out, io.Discard, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "domain: hotlimitd") {
		t.Fatalf("printed %q", out.String())
	}
}

// TestBadFlags: bad flags and a bad configuration stop the command at
// once, with an error naming them.
func TestBadFlags(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-backend", "memcached"}, "-backend"},
		{[]string{"-backend", "redis"}, "-redis"},
		{[]string{"-log-format", "xml"}, "-log-format"},
		{[]string{"-log-level", "loud"}, "-log-level"},
		{[]string{"-config", bad}, "bad.yaml:5"},
		{[]string{"-config", filepath.Join(t.TempDir(), "missing.yaml")}, "missing.yaml"},
		{[]string{"-grpc", "127.0.0.1:-1"}, "127.0.0.1:-1"},
		{[]string{"extra"}, "unexpected"},
		{[]string{"-max-keys", "-1"}, "-max-keys"},
		{[]string{"-gc-heap-floor", "64MB"}, "-gc-heap-floor"},
		{[]string{"-gc-heap-floor", "-1"}, "-gc-heap-floor"},
		{[]string{"-grpc-stream-workers", "-1"}, "-grpc-stream-workers"},
		{[]string{"-grpc-stream-workers", "65537"}, "-grpc-stream-workers"},
		{[]string{"-headers", "-partition-key-secret-file", filepath.Join(t.TempDir(), "missing")}, "-partition-key-secret-file"},
		{[]string{"-headers", "-partition-key-secret-file", empty}, "is empty"},
		{[]string{"-partition-key-secret-file", secret}, "needs -headers"},
		{[]string{"-backend", "redis", "-redis", "127.0.0.1:1", "-max-keys", "5"}, "-max-keys"},
		{[]string{"-limit-header-reset", "X-RateLimit-Reset"}, "needs -limit-headers"},
		{[]string{"-limit-headers", "-limit-header-limit", "X RateLimit"}, "-limit-header-limit"},
		{[]string{"-limit-headers", "-limit-header-remaining", ""}, "-limit-header-remaining"},
		{[]string{"-limit-headers", "-limit-header-reset", "ratelimit-limit"}, "-limit-header-reset"},
		{[]string{"-limit-headers", "-limit-header-limit", "Retry-After"}, "-limit-header-limit"},
		{[]string{"-redis-timeout", "5s"}, "-redis-timeout"},
		{[]string{"-redis-local-denials", "10"}, "-backend redis"},
		{[]string{"-backend", "redis", "-redis", "127.0.0.1:1", "-redis-timeout", "0s"}, "-redis-timeout"},
		{[]string{"-backend", "redis", "-redis", "127.0.0.1:1", "-redis-breaker-failures", "0"}, "-redis-breaker-failures"},
		{[]string{"-backend", "redis", "-redis", "127.0.0.1:1", "-redis-breaker-open", "-1s"}, "-redis-breaker-open"},
		{[]string{"-backend", "redis", "-redis", "127.0.0.1:1", "-redis-local-denials", "-1"}, "-redis-local-denials"},
		{[]string{"-backend", "lease", "-redis", "127.0.0.1:1", "-redis-local-denials", "5"}, "-redis-local-denials"},
		{[]string{"-redis-prefix", "team:"}, "-backend local"},
		{[]string{"-backend", "redis", "-redis", "127.0.0.1:1", "-redis-prefix", "team{a}:"}, "-redis-prefix"},
	} {
		args := append([]string{"-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0"}, tc.args...)
		err := run(context.Background(), args, io.Discard, io.Discard, nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %s", tc.args, err, tc.want)
		}
	}
}

const twoPerMinute = `domain: d
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 2
`

// TestReload: SIGHUP reloads -config; a bad file is refused, counted,
// and the running configuration is kept; a good one is applied.
func TestReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(twoPerMinute)
	r := startCmd(t, nil, "-config", path, "-reload-interval", "0")
	for i, want := range []string{"OK", "OK", "OVER_LIMIT"} {
		if got := r.ask(t, "d", "user", "ann").OverallCode.String(); got != want {
			t.Fatalf("request %d: %s, want %s", i, got, want)
		}
	}
	write("domain: d\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: minute\n      requests_per_unit: -5\n")
	r.hup()
	resp := r.ask(t, "d", "user", "ann")
	if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 2 {
		t.Fatalf("after a bad reload: %v, want the running limit of 2, still over", resp)
	}
	if got := r.metric(t, `hotlimitd_config_reloads_total{result="failure"}`); !strings.HasSuffix(got, " 1") {
		t.Fatalf("metric %q", got)
	}
	if got := r.metric(t, `hotlimitd_config_last_reload_successful`); !strings.HasSuffix(got, " 0") {
		t.Fatalf("metric %q", got)
	}
	if !strings.Contains(r.logs.String(), "limits.yaml:6") {
		t.Fatalf("the refusal's log does not name the file and line:\n%s", r.logs)
	}
	write(strings.ReplaceAll(twoPerMinute, "requests_per_unit: 2", "requests_per_unit: 5"))
	r.hup()
	if got := r.ask(t, "d", "user", "bob").Statuses[0]; got.CurrentLimit.GetRequestsPerUnit() != 5 || got.LimitRemaining != 4 {
		t.Fatalf("after a good reload: %v, want 4 left of 5", got)
	}
	if got := r.metric(t, `hotlimitd_config_reloads_total{result="success"}`); !strings.HasSuffix(got, " 1") {
		t.Fatalf("metric %q", got)
	}
}

// TestFlagMergeDomains: -merge-domains serves one domain from several
// files, and a reload that adds a rule another file has is refused, its
// log naming both files, the running configuration kept; without the
// flag such a directory does not start.
func TestFlagMergeDomains(t *testing.T) {
	dir := t.TempDir()
	writeTo := func(name, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeTo("a.yaml", twoPerMinute)
	writeTo("b.yaml", "domain: d\ndescriptors:\n  - key: path\n    rate_limit:\n      unit: minute\n      requests_per_unit: 7\n")
	err := run(context.Background(), []string{"-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0", "-config", dir}, io.Discard, io.Discard, nil, nil)
	if err == nil || !strings.Contains(err.Error(), `"d" is also at`) {
		t.Fatalf("without -merge-domains: %v", err)
	}
	r := startCmd(t, nil, "-config", dir, "-reload-interval", "0", "-merge-domains")
	if got := r.ask(t, "d", "user", "ann").Statuses[0]; got.CurrentLimit.GetRequestsPerUnit() != 2 || got.LimitRemaining != 1 {
		t.Fatalf("a.yaml's rule: %v", got)
	}
	if got := r.ask(t, "d", "path", "/").Statuses[0]; got.CurrentLimit.GetRequestsPerUnit() != 7 {
		t.Fatalf("b.yaml's rule: %v", got)
	}
	writeTo("c.yaml", twoPerMinute)
	r.hup()
	if !strings.Contains(r.logs.String(), filepath.Join(dir, "c.yaml")+":3") || !strings.Contains(r.logs.String(), "also at "+filepath.Join(dir, "a.yaml")+":3") {
		t.Fatalf("the refusal's log does not name both files:\n%s", r.logs)
	}
	if got := r.ask(t, "d", "user", "ann").Statuses[0]; got.LimitRemaining != 0 {
		t.Fatalf("after the refused reload: %v, want a.yaml's limit with its state (0 left)", got)
	}
}

// TestMaxKeys: -max-keys bounds each limit of the in-process backend. With
// a bound of 1, a second key evicts the first, drained, one (the only
// entry), so the first is admitted again; without the bound it stays
// refused for the hour.
func TestMaxKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(strings.ReplaceAll(twoPerMinute, "minute", "hour"), "requests_per_unit: 2", "requests_per_unit: 1")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		maxKeys string
		want    []string // ann, ann, bob, ann
	}{
		{"1", []string{"OK", "OVER_LIMIT", "OK", "OK"}},
		{"0", []string{"OK", "OVER_LIMIT", "OK", "OVER_LIMIT"}},
	} {
		r := startCmd(t, nil, "-config", path, "-reload-interval", "0", "-max-keys", tc.maxKeys)
		for i, user := range []string{"ann", "ann", "bob", "ann"} {
			if got := r.ask(t, "d", "user", user).OverallCode.String(); got != tc.want[i] {
				t.Errorf("-max-keys %s, request %d (%s): %s, want %s", tc.maxKeys, i, user, got, tc.want[i])
			}
		}
		r.stop(t)
	}
}

// blocking is a backend whose decisions wait until released.
type blocking struct {
	admission.Backend
	entered chan struct{}
	release chan struct{}
}

func (b *blocking) AllowStates(ctx context.Context, ls []admission.Layer, st []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.Backend.AllowStates(ctx, ls, st)
}

// TestGracefulShutdown: SIGTERM turns health to NOT_SERVING (gRPC and
// /healthcheck) at once, and an RPC in flight still completes.
func TestGracefulShutdown(t *testing.T) {
	b := &blocking{entered: make(chan struct{}), release: make(chan struct{})}
	r := startCmd(t, &hooks{backend: func(inner admission.Backend) admission.Backend { b.Backend = inner; return b }})
	var once sync.Once
	release := func() { once.Do(func() { close(b.release) }) }
	t.Cleanup(release) // before startCmd's: a failure below must not leave the RPC blocked
	// The deadline only turns a missing NOT_SERVING into a failure
	// rather than a hang; nothing waits for it when the server is right.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	watch, err := healthpb.NewHealthClient(r.conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := watch.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health watch: %v, %v", m, err)
	}
	inflight := make(chan error, 1)
	go func() {
		resp, err := r.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "hotlimitd",
			Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "a"}}}}})
		if err == nil && resp.OverallCode != rlsv3.RateLimitResponse_OK {
			err = errors.New(resp.String())
		}
		inflight <- err
	}()
	<-b.entered
	r.sigs <- syscall.SIGTERM
	if m, err := watch.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health watch after SIGTERM: %v, %v", m, err)
	}
	if code, _ := r.get(t, "/healthcheck"); code != http.StatusServiceUnavailable {
		t.Fatalf("/healthcheck during shutdown: %d", code)
	}
	cancel() // the watch, an RPC too, ends
	release()
	if err := <-inflight; err != nil {
		t.Fatalf("the RPC in flight: %v", err)
	}
	if err := <-r.done; err != nil {
		t.Fatalf("run: %v", err)
	}
	r.a = nil
	// Stopped: new RPCs are refused.
	if _, err := healthpb.NewHealthClient(r.conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("health after shutdown: %v", err)
	}
}

// failing is a backend that cannot decide.
type failing struct{}

var errDown = errors.New("store down")

func (failing) AllowStates(context.Context, []admission.Layer, []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	return hotlimit.Decision{}, -1, errDown
}

func (failing) Reset(context.Context, string, string) error { return errDown }

func (failing) Close() error { return nil }

// TestLogsHoldNoKeys: the logs of a whole life (start, requests the
// backend fails, a refused reload, shutdown), at the debug level, hold no
// descriptor key or value of a request.
func TestLogsHoldNoKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(path, []byte(twoPerMinute), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "text"} {
		r := startCmd(t, &hooks{backend: func(admission.Backend) admission.Backend { return failing{} }},
			"-config", path, "-reload-interval", "0", "-log-level", "debug", "-log-format", format)
		for range 3 {
			_, err := r.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "d",
				Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "user", Value: "s3cr3t-value"}}}}})
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("error %v, want Unavailable", err)
			}
		}
		r.stop(t)
		logs := r.logs.String()
		if !strings.Contains(logs, "store down") || !strings.Contains(logs, "stopped") {
			t.Fatalf("%s logs miss the backend error or the shutdown:\n%s", format, logs)
		}
		if strings.Contains(logs, "s3cr3t") {
			t.Fatalf("%s logs hold a descriptor value:\n%s", format, logs)
		}
	}
}

// TestFlagsHeadersFailOpen: -headers adds the RateLimit fields to the
// answers, and -fail-open answers OK when the backend cannot decide.
func TestFlagsHeadersFailOpen(t *testing.T) {
	r := startCmd(t, nil, "-headers")
	resp := r.ask(t, "hotlimitd", "generic_key", "a")
	keys := ""
	for _, h := range resp.ResponseHeadersToAdd {
		keys += h.Key + " "
	}
	if keys != "RateLimit-Policy RateLimit " {
		t.Fatalf("-headers: headers %q", keys)
	}
	r = startCmd(t, &hooks{backend: func(admission.Backend) admission.Backend { return failing{} }}, "-fail-open")
	if resp := r.ask(t, "hotlimitd", "generic_key", "a"); resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit != nil {
		t.Fatalf("-fail-open: %v", resp)
	}
	if got := r.metric(t, `hotlimitd_requests_total{code="failed_open"}`); !strings.HasSuffix(got, " 1") {
		t.Fatalf("metric %q", got)
	}
}

// TestFlagLimitHeaders: -limit-headers adds envoyproxy/ratelimit's three
// headers, under the -limit-header-* names, beside -headers' own.
func TestFlagLimitHeaders(t *testing.T) {
	r := startCmd(t, nil, "-limit-headers", "-limit-header-remaining", "X-RateLimit-Remaining", "-headers")
	got := map[string]string{}
	for _, h := range r.ask(t, "hotlimitd", "generic_key", "a").ResponseHeadersToAdd {
		got[h.Key] = h.Value
	}
	// generic_key: a token bucket of 100 a second, one taken, 10ms to
	// its next token (1s rounded up).
	if len(got) != 5 || got["RateLimit-Limit"] != "100" || got["X-RateLimit-Remaining"] != "99" || got["RateLimit-Reset"] != "1" || got["RateLimit"] == "" {
		t.Fatalf("headers %v", got)
	}
}

// TestPartitionKeySecretFile: two processes given one
// -partition-key-secret-file give a key the same pk (replicas behind one
// Envoy); without it each draws its own secret.
func TestPartitionKeySecretFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte("replicas' secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pk := func(args ...string) string {
		t.Helper()
		r := startCmd(t, nil, append([]string{"-headers"}, args...)...)
		defer r.stop(t)
		for _, h := range r.ask(t, "hotlimitd", "generic_key", "a").ResponseHeadersToAdd {
			if h.Key == "RateLimit" {
				if i := strings.Index(h.Value, ";pk=:"); i >= 0 {
					return h.Value[i:]
				}
			}
		}
		t.Fatal("no pk in the RateLimit field")
		return ""
	}
	shared1, shared2 := pk("-partition-key-secret-file", path), pk("-partition-key-secret-file", path)
	if shared1 != shared2 {
		t.Errorf("one secret file, two pks: %q and %q", shared1, shared2)
	}
	if own := pk(); own == shared1 {
		t.Errorf("a random secret gave the shared secret's pk %q", own)
	}
}

// TestPollReload: the poll (-reload-interval) applies a changed file and
// refuses a bad one, keeping the running configuration, as SIGHUP does.
// The test waits for each load's report, never for time.
func TestPollReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	write := func(s string) { // atomically: the poll never reads half a file
		if err := os.WriteFile(path+".new", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	write(twoPerMinute)
	loaded := make(chan error, 16)
	r := startCmd(t, &hooks{loaded: func(err error) { loaded <- err }}, "-config", path, "-reload-interval", "5ms")
	write(strings.ReplaceAll(twoPerMinute, "requests_per_unit: 2", "requests_per_unit: 5"))
	if err := nextLoad(t, loaded); err != nil {
		t.Fatalf("the changed file was refused: %v", err)
	}
	if got := r.ask(t, "d", "user", "ann").Statuses[0].CurrentLimit.GetRequestsPerUnit(); got != 5 {
		t.Fatalf("after the poll: limit %d, want 5", got)
	}
	write("domain: d\ndescriptors: [\n")
	if err := nextLoad(t, loaded); err == nil || !strings.Contains(err.Error(), "limits.yaml") {
		t.Fatalf("the bad file: %v, want an error naming it", err)
	}
	if got := r.ask(t, "d", "user", "ann").Statuses[0].CurrentLimit.GetRequestsPerUnit(); got != 5 {
		t.Fatalf("after a bad file: limit %d, want the running 5", got)
	}
}

// TestShutdownGraceZero: -shutdown-grace 0 is no grace: SIGTERM stops
// the RPCs in flight at once, and logs them with their number; with none
// in flight, nothing is logged as having outlived the grace.
func TestShutdownGraceZero(t *testing.T) {
	r := startCmd(t, nil, "-shutdown-grace", "0")
	r.ask(t, "hotlimitd", "generic_key", "a") // answered: not in flight
	r.stop(t)
	if logs := r.logs.String(); strings.Contains(logs, "outlived") {
		t.Fatalf("no RPC was in flight, yet:\n%s", logs)
	}

	b := &blocking{entered: make(chan struct{}), release: make(chan struct{})}
	r = startCmd(t, &hooks{backend: func(inner admission.Backend) admission.Backend { b.Backend = inner; return b }}, "-shutdown-grace", "0")
	var once sync.Once
	release := func() { once.Do(func() { close(b.release) }) }
	t.Cleanup(release)
	inflight := make(chan error, 1)
	go func() {
		_, err := r.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "hotlimitd",
			Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "a"}}}}})
		inflight <- err
	}()
	<-b.entered
	r.stop(t) // returns with the RPC still blocked in the backend: stopped, not waited for
	if err := <-inflight; status.Code(err) != codes.Unavailable {
		t.Fatalf("the RPC in flight: %v, want it stopped (Unavailable)", err)
	}
	if logs := r.logs.String(); !strings.Contains(logs, "outlived -shutdown-grace") || !strings.Contains(logs, "rpcs=1") {
		t.Fatalf("the stopped RPC is not logged with its number:\n%s", logs)
	}
	release()
}

// TestReloadDropsSeries: a reload deletes the Prometheus series of the
// limits it dropped, and keeps the counts of those it kept.
func TestReloadDropsSeries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(twoPerMinute + "  - key: path\n    rate_limit:\n      unit: hour\n      requests_per_unit: 7\n")
	r := startCmd(t, nil, "-config", path, "-reload-interval", "0")
	r.ask(t, "d", "user", "ann")
	r.ask(t, "d", "path", "/x")
	series := func() (user, path []string) {
		_, body := r.get(t, "/metrics")
		for _, l := range strings.Split(body, "\n") {
			if !strings.HasPrefix(l, "hotlimit_backend_") {
				continue
			}
			if strings.Contains(l, "path") {
				path = append(path, l)
			} else if strings.Contains(l, "_count{") {
				user = append(user, l)
			}
		}
		return user, path
	}
	userBefore, path0 := series()
	if len(path0) == 0 || len(userBefore) == 0 {
		t.Fatalf("before the reload: user's counts %q, path's series %d, want both", userBefore, len(path0))
	}
	write(twoPerMinute)
	r.hup()
	userAfter, pathAfter := series()
	if len(pathAfter) > 0 {
		t.Errorf("the dropped limit's series stay:\n%s", strings.Join(pathAfter, "\n"))
	}
	if strings.Join(userAfter, "\n") != strings.Join(userBefore, "\n") {
		t.Errorf("the kept limit's counts changed:\n%s\nwant\n%s", strings.Join(userAfter, "\n"), strings.Join(userBefore, "\n"))
	}
}

// gcPercent returns the runtime's GC percent, leaving it as it was.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestGCHeapFloor: -gc-heap-floor raises the GC percent of a small live
// heap while the command runs, and puts it back when it stops; 0 and a
// GOGC in the environment leave the percent alone (the tests run one
// command at a time: the percent is the process's).
func TestGCHeapFloor(t *testing.T) {
	if p := gcPercent(); p != 100 {
		t.Skipf("the GC percent is %d here: this test needs GOGC's default", p)
	}
	// A GOGC of 100 in the test's own environment (GOGC=100 go test)
	// would turn the floor off in the cases that want it: none for them.
	t.Setenv("GOGC", "") // put back as it was when the test ends
	os.Unsetenv("GOGC")
	for _, tc := range []struct {
		floor, gogc string
		setGOGC     bool // gogc in the environment, even if empty
		raised      bool
	}{
		{"", "", false, true}, // the default, 64MiB
		{"32MiB", "", false, true},
		{"0", "", false, false},
		{"64MiB", "100", true, false},
		{"64MiB", "off", true, false},
		// Go reads an empty or malformed GOGC as 100: the floor stays on.
		{"64MiB", "", true, true},
		{"64MiB", "fast", true, true},
	} {
		if tc.setGOGC {
			t.Setenv("GOGC", tc.gogc)
		} else {
			os.Unsetenv("GOGC")
		}
		args := []string{"-reload-interval", "0"}
		if tc.floor != "" {
			args = append(args, "-gc-heap-floor", tc.floor)
		}
		r := startCmd(t, nil, args...) // Start sets the percent before it returns
		if p := gcPercent(); (p > 100) != tc.raised {
			t.Errorf("-gc-heap-floor %q, GOGC %q (set %v): the GC percent is %d while serving; want it raised: %v", tc.floor, tc.gogc, tc.setGOGC, p, tc.raised)
		}
		if logged := strings.Contains(r.logs.String(), "-gc-heap-floor is off: GOGC is set"); logged != (tc.setGOGC && !tc.raised) {
			t.Errorf("-gc-heap-floor %q, GOGC %q (set %v): the log says the floor is off: %v, want %v:\n%s", tc.floor, tc.gogc, tc.setGOGC, logged, tc.setGOGC && !tc.raised, r.logs)
		}
		r.stop(t)
		if p := gcPercent(); p != 100 {
			t.Errorf("-gc-heap-floor %q, GOGC %q: the GC percent is %d after the command stopped, want 100", tc.floor, tc.gogc, p)
		}
	}
}

// streamWorkers returns the number of goroutines serving as gRPC's stream
// workers, once it is want or about 10 s have passed (the workers of a
// server that stopped end on their own goroutines).
func streamWorkers(t *testing.T, want int) int {
	t.Helper()
	n := -1
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var b strings.Builder
		if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
			t.Fatal(err)
		}
		n = 0
		for _, block := range strings.Split(b.String(), "\n\n") {
			if strings.Contains(block, "grpc.(*Server).serverWorker") {
				// "N @ pcs", the block's first line (after the profile's
				// own header in the first block)
				head := block[strings.LastIndex(block[:strings.Index(block, " @ ")], "\n")+1:]
				count, _, _ := strings.Cut(head, " ")
				c, err := strconv.Atoi(count)
				if err != nil {
					t.Fatalf("goroutine profile block %q: %v", block, err)
				}
				n += c
			}
		}
		if n == want {
			break
		}
	}
	return n
}

// TestGRPCStreamWorkers: -grpc-stream-workers keeps that many goroutines
// serving gRPC, 64 by default, none with 0; requests are served either
// way.
func TestGRPCStreamWorkers(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want int
	}{{"0", 0}, {"", 64}, {"7", 7}, {"0", 0}} {
		args := []string{"-reload-interval", "0"}
		if tc.arg != "" {
			args = append(args, "-grpc-stream-workers", tc.arg)
		}
		r := startCmd(t, nil, args...)
		if got := streamWorkers(t, tc.want); got != tc.want {
			t.Errorf("-grpc-stream-workers %q: %d stream workers, want %d", tc.arg, got, tc.want)
		}
		for range 3 {
			if resp := r.ask(t, "hotlimitd", "generic_key", "k"); resp.OverallCode != rlsv3.RateLimitResponse_OK {
				t.Errorf("-grpc-stream-workers %q: %v, want OK", tc.arg, resp.OverallCode)
			}
		}
		r.stop(t)
	}
}
