package httplimit_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/hotlimit/hotlimit/admission"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
)

const slogToken = "hl_live_5e0b8c2d41a7f963" // must appear in no log line, nor its hash

// switchable is a Local backend that fails while down is set.
type switchable struct {
	*admission.Local
	down *atomic.Bool
}

var errStoreDown = errors.New("store down")

func (b switchable) AllowStates(ctx context.Context, ls []admission.Layer, st []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	if b.down.Load() {
		return hotlimit.Decision{}, -1, errStoreDown
	}
	return b.Local.AllowStates(ctx, ls, st)
}

// logRig is a middleware on a ManualClock whose hook is a DenialLogger
// writing JSON lines to buf.
type logRig struct {
	h     http.Handler
	dl    *httplimit.DenialLogger
	buf   *bytes.Buffer
	clock *hotlimit.ManualClock
	down  *atomic.Bool
}

func newLogRig(t *testing.T, dryRun bool, burst int64) *logRig {
	t.Helper()
	rig := &logRig{buf: new(bytes.Buffer), clock: hotlimit.NewManualClock(), down: new(atomic.Bool)}
	rig.clock.Set(time.Hour)
	var err error
	rig.dl, err = httplimit.NewDenialLogger(slog.New(slog.NewJSONHandler(rig.buf, nil)),
		httplimit.DenialLogOptions{Instance: "api-1", Rate: hotlimit.PerSecond(1), Burst: burst, Clock: rig.clock})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Config{
		Limits:        map[string]hotlimit.Policy{"search": hotlimit.FixedWindow{Limit: 1, Window: time.Hour}},
		Groups:        []httplimit.Group{{Name: "search", Limit: "search"}},
		DefaultGroup:  "search",
		Key:           httplimit.TokenKey("Authorization"),
		PolicyVersion: "2026-12-01.1",
		DryRun:        dryRun,
		Hook:          rig.dl.Hook,
		Backend: func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
			b, err := admission.LocalBackend(hotlimit.WithClock(rig.clock), hotlimit.WithSweepInterval(0))(limits)
			l, _ := b.(*admission.Local)
			return switchable{l, rig.down}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	rig.h = m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	return rig
}

func (rig *logRig) send(tok string) {
	r := httptest.NewRequest("GET", "/search?q=secret-query", nil)
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	rig.h.ServeHTTP(httptest.NewRecorder(), r)
}

// lines returns the log lines written since the last call, decoded.
func (rig *logRig) lines(t *testing.T) []map[string]any {
	t.Helper()
	out := rig.buf.String()
	rig.buf.Reset()
	for _, secret := range secrets() {
		if strings.Contains(out, secret) {
			t.Errorf("a log line holds %q:\n%s", secret, out)
		}
	}
	var ls []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		delete(m, "time")
		ls = append(ls, m)
	}
	return ls
}

// secrets are the strings no line may hold: the token, its hash as the
// key holds it, the key prefix, and the query.
func secrets() []string {
	sum := sha256.Sum256([]byte(slogToken))
	return []string{slogToken, hex.EncodeToString(sum[:16]), "rl:v1", "secret-query", "Bearer"}
}

func TestDenialLogger(t *testing.T) {
	rig := newLogRig(t, false, 10)
	rig.send(slogToken) // allowed: no line
	rig.send(slogToken) // denied
	rig.send("")        // no key
	rig.down.Store(true)
	rig.send(slogToken) // backend down, failing closed
	ls := rig.lines(t)
	if len(ls) != 3 {
		t.Fatalf("%d lines, want 3: %v", len(ls), ls)
	}
	id, _ := ls[0]["id_hash"].(string)
	if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Errorf("id_hash %q: want 16 hex digits", id)
	}
	want := []map[string]any{{
		"level": "INFO", "msg": "rate limit denial",
		"id_hash": id, "id_kind": "tok", "group": "search", "limit": "search", "algorithm": "FixedWindow",
		"policy_version": "2026-12-01.1", "instance": "api-1", "method": "GET",
		"outcome": "denied", "reason": "rate_limit_exceeded",
		"decision": map[string]any{"limit": 1.0, "remaining": 0.0, "retry_after": float64(time.Hour), "reset_after": float64(time.Hour)},
	}, {
		"level": "INFO", "msg": "rate limit denial",
		"group": "search", "policy_version": "2026-12-01.1", "instance": "api-1", "method": "GET",
		"outcome": "key_denied", "reason": "rate_limit_key_missing", "error": httplimit.ErrNoKey.Error(),
	}, {
		"level": "WARN", "msg": "rate limiter unavailable",
		"id_hash": id, "id_kind": "tok", "group": "search", "policy_version": "2026-12-01.1", "instance": "api-1", "method": "GET",
		"outcome": "error_denied", "reason": "rate_limiter_unavailable", "error": errStoreDown.Error(),
	}}
	for i := range want {
		if !reflect.DeepEqual(ls[i], want[i]) {
			t.Errorf("line %d:\n got %v\nwant %v", i, ls[i], want[i])
		}
	}
}

func TestDenialLoggerDryRun(t *testing.T) {
	rig := newLogRig(t, true, 10)
	rig.send(slogToken)
	rig.send(slogToken) // would be denied
	rig.send("")        // no key: would be denied
	rig.down.Store(true)
	rig.send(slogToken) // backend down: let through
	var got []string
	for _, l := range rig.lines(t) {
		got = append(got, l["level"].(string)+" "+l["outcome"].(string)+" "+l["reason"].(string))
	}
	want := []string{
		"INFO dry_run_denied rate_limit_exceeded",
		"INFO dry_run_denied rate_limit_key_missing",
		"WARN error_allowed rate_limiter_unavailable",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}

// TestDenialLoggerBudget: a flood writes Burst lines, then one line per
// 1/Rate, each after a summary of what was suppressed; Flush writes a
// pending summary.
func TestDenialLoggerBudget(t *testing.T) {
	rig := newLogRig(t, false, 2)
	rig.send(slogToken) // allowed
	for range 10 {
		rig.send(slogToken)
	}
	rig.send("")
	rig.send("")
	if ls := rig.lines(t); len(ls) != 2 {
		t.Fatalf("a flood of 12 denials with Burst 2 wrote %d lines, want 2", len(ls))
	}
	rig.clock.Advance(time.Second)
	rig.send("")
	ls := rig.lines(t)
	want := map[string]any{"level": "WARN", "msg": "rate limit denial lines suppressed",
		"suppressed": 10.0, "denied": 8.0, "key_denied": 2.0, "instance": "api-1"}
	if len(ls) != 2 || !reflect.DeepEqual(ls[0], want) || ls[1]["outcome"] != "key_denied" {
		t.Fatalf("after 1s: lines %v, want the summary %v then the key_denied line", ls, want)
	}
	rig.send(slogToken)
	rig.send(slogToken)
	rig.dl.Flush()
	ls = rig.lines(t)
	want = map[string]any{"level": "WARN", "msg": "rate limit denial lines suppressed",
		"suppressed": 2.0, "denied": 2.0, "instance": "api-1"}
	if len(ls) != 1 || !reflect.DeepEqual(ls[0], want) {
		t.Fatalf("Flush: lines %v, want %v", ls, want)
	}
	rig.dl.Flush()
	if ls := rig.lines(t); len(ls) != 0 {
		t.Fatalf("a second Flush wrote %v", ls)
	}
}

// TestDenialLoggerConcurrent: concurrent denials and flushes, time
// frozen: exactly Burst denial lines, and the summaries add up to the
// rest.
func TestDenialLoggerConcurrent(t *testing.T) {
	buf := &lockedBuffer{}
	clock := hotlimit.NewManualClock()
	dl, err := httplimit.NewDenialLogger(slog.New(slog.NewJSONHandler(buf, nil)),
		httplimit.DenialLogOptions{Instance: "i", Rate: hotlimit.PerHour(1), Burst: 5, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 500
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range each {
				dl.Hook(admission.Event{Group: "g", Outcome: admission.OutcomeDenied})
				dl.Hook(admission.Event{Group: "g", Outcome: admission.OutcomeAllowed}) // never logged
				if j%100 == 0 {
					dl.Flush()
				}
			}
		})
	}
	wg.Wait()
	dl.Flush()
	lines, suppressed := 0, 0.0
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if n, ok := m["suppressed"].(float64); ok {
			suppressed += n
		} else {
			lines++
		}
	}
	if lines != 5 || suppressed != workers*each-5 {
		t.Errorf("%d denial lines and %v suppressed, want 5 and %d", lines, suppressed, workers*each-5)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestDenialLoggerBadOptions(t *testing.T) {
	if _, err := httplimit.NewDenialLogger(nil, httplimit.DenialLogOptions{}); err == nil {
		t.Error("nil logger accepted")
	}
	l := slog.New(slog.DiscardHandler)
	if _, err := httplimit.NewDenialLogger(l, httplimit.DenialLogOptions{Burst: -1}); err == nil {
		t.Error("Burst -1 accepted")
	}
	if _, err := httplimit.NewDenialLogger(l, httplimit.DenialLogOptions{Rate: hotlimit.Rate{N: 1}}); err == nil {
		t.Error("Rate with Per 0 accepted")
	}
	dl, err := httplimit.NewDenialLogger(l, httplimit.DenialLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dl.Hook(admission.Event{Outcome: admission.OutcomeDenied}) // no Context: no panic
}

// TestDenialLoggerSuppressedAllocs: a suppressed line allocates nothing.
func TestDenialLoggerSuppressedAllocs(t *testing.T) {
	clock := hotlimit.NewManualClock()
	dl, err := httplimit.NewDenialLogger(slog.New(slog.DiscardHandler),
		httplimit.DenialLogOptions{Rate: hotlimit.PerHour(1), Burst: 1, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ev := admission.Event{Group: "g", Outcome: admission.OutcomeDenied}
	dl.Hook(ev)
	if n := testing.AllocsPerRun(100, func() { dl.Hook(ev) }); n != 0 {
		t.Errorf("a suppressed line allocates %v times", n)
	}
}
