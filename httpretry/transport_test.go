package httpretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const dateFmt = http.TimeFormat

// TestWaitsExactly checks the wait before the one retry for each way a
// server can ask, with the jitter at both ends of its range.
func TestWaitsExactly(t *testing.T) {
	date := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		header map[string]string
		rand   func(int64) int64
		want   time.Duration
	}{
		{"retry-after seconds", map[string]string{"Retry-After": "7"}, randZero, 7 * time.Second},
		{"backoff above ask", map[string]string{"Retry-After": "0"}, randMax, DefaultBaseDelay},
		{"ask above backoff", map[string]string{"Retry-After": "1"}, randMax, time.Second},
		{"no ask: backoff", nil, randHalf, DefaultBaseDelay / 2},
		{"http-date against Date", map[string]string{
			"Date": date.Format(dateFmt), "Retry-After": date.Add(42 * time.Second).Format(dateFmt)}, randZero, 42 * time.Second},
		{"http-date in the past", map[string]string{
			"Date": date.Format(dateFmt), "Retry-After": date.Add(-time.Hour).Format(dateFmt)}, randMax, DefaultBaseDelay},
		{"ratelimit r=0", map[string]string{"RateLimit": `"default";r=0;t=17`}, randZero, 17 * time.Second},
		{"ratelimit largest exhausted policy", map[string]string{
			"RateLimit": `"burst";r=0;t=3, "daily";r=0;t=30, "hourly";r=5;t=900`}, randZero, 30 * time.Second},
		{"ratelimit r>0 asks nothing", map[string]string{"RateLimit": `"default";r=4;t=50`}, randZero, 0},
		{"retry-after wins over ratelimit", map[string]string{
			"Retry-After": "2", "RateLimit": `"default";r=0;t=9`}, randZero, 2 * time.Second},
		{"malformed retry-after: ratelimit", map[string]string{
			"Retry-After": "soon", "RateLimit": `"default";r=0;t=9`}, randZero, 9 * time.Second},
		{"x-ratelimit-reset seconds", map[string]string{
			"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "12"}, randZero, 12 * time.Second},
		{"x-ratelimit-reset epoch against Date", map[string]string{
			"Date": date.Format(dateFmt), "X-RateLimit-Remaining": "0",
			"X-RateLimit-Reset": fmt.Sprint(date.Unix() + 25)}, randZero, 25 * time.Second},
		{"x-ratelimit-reset ignored with remaining > 0", map[string]string{
			"X-RateLimit-Remaining": "3", "X-RateLimit-Reset": "12"}, randMax, DefaultBaseDelay},
		{"malformed everything: backoff", map[string]string{
			"Retry-After": "-3", "RateLimit": `"default";r=0;t=1.5`, "X-RateLimit-Reset": "soon"}, randMax, DefaultBaseDelay},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, srv := serve(t, reply{status: 429, header: tc.header, body: "slow down"}, reply{body: "ok"})
			ft := newFakeTime()
			tr, base := newTransport(ft, tc.rand)
			tr.DisableHostGate = true
			resp := get(t, tr, context.Background(), srv.URL)
			if got := readBody(t, resp); resp.StatusCode != 200 || got != "ok" {
				t.Fatalf("got %d %q, want 200 ok", resp.StatusCode, got)
			}
			if got := ft.Sleeps(); len(got) != 1 || got[0] != tc.want {
				t.Errorf("sleeps %v, want [%v]", got, tc.want)
			}
			if n := s.hits.Load(); n != 2 {
				t.Errorf("server hit %d times, want 2", n)
			}
			base.checkDiscardedClosed(t)
		})
	}
}

// TestNeverSoonerThanAsked sends random asks and random jitter and checks
// every wait against the ask and the backoff bound.
func TestNeverSoonerThanAsked(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 40 {
		ask := time.Duration(r.IntN(20)) * time.Second
		var h map[string]string
		switch i % 3 {
		case 0:
			h = map[string]string{"Retry-After": fmt.Sprint(int(ask / time.Second))}
		case 1:
			h = map[string]string{"RateLimit": fmt.Sprintf(`"p";r=0;t=%d`, int(ask/time.Second))}
		case 2:
			h = map[string]string{"X-RateLimit-Reset": fmt.Sprint(int(ask / time.Second))}
		}
		_, srv := serve(t, reply{status: 429, header: h}, reply{status: 429, header: h}, reply{})
		ft := newFakeTime()
		tr, _ := newTransport(ft, lockedRand(uint64(i)))
		tr.BaseDelay, tr.MaxDelay = 2*time.Second, 8*time.Second
		tr.DisableHostGate = true
		resp := get(t, tr, context.Background(), srv.URL)
		resp.Body.Close()
		sleeps := ft.Sleeps()
		if len(sleeps) != 2 {
			t.Fatalf("case %d: sleeps %v, want 2", i, sleeps)
		}
		for n, d := range sleeps {
			ceil := min(tr.MaxDelay, tr.BaseDelay<<n)
			if d < ask || d > max(ask, ceil) {
				t.Errorf("case %d (%v): wait %d = %v, want in [%v, %v]", i, h, n, d, ask, max(ask, ceil))
			}
		}
	}
}

func TestPOSTNotRetried(t *testing.T) {
	s, srv := serve(t, reply{status: 429, header: map[string]string{"Retry-After": "1"}, body: "no"}, reply{body: "ok"})
	ft := newFakeTime()
	tr, _ := newTransport(ft, randZero)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("payload"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); resp.StatusCode != 429 || got != "no" {
		t.Errorf("got %d %q, want the 429 as sent", resp.StatusCode, got)
	}
	if n := s.hits.Load(); n != 1 {
		t.Errorf("server hit %d times, want 1", n)
	}
	if len(ft.Sleeps()) != 0 {
		t.Errorf("slept %v", ft.Sleeps())
	}
}

func TestMarkedPOSTRetriedWithBody(t *testing.T) {
	for _, mark := range []string{"context", "header"} {
		t.Run(mark, func(t *testing.T) {
			s, srv := serve(t,
				reply{status: 429, header: map[string]string{"Retry-After": "1"}},
				reply{status: 429, header: map[string]string{"Retry-After": "1"}},
				reply{status: 201, body: "created"})
			ft := newFakeTime()
			tr, base := newTransport(ft, randZero)
			ctx := context.Background()
			if mark == "context" {
				ctx = MarkIdempotent(ctx)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewBufferString("payload"))
			if mark == "header" {
				req.Header.Set("Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324")
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := readBody(t, resp); resp.StatusCode != 201 || got != "created" {
				t.Errorf("got %d %q", resp.StatusCode, got)
			}
			bodies := s.Bodies()
			if len(bodies) != 3 {
				t.Fatalf("server got %d requests, want 3", len(bodies))
			}
			for i, b := range bodies {
				if b != "payload" {
					t.Errorf("request %d body %q, want payload", i+1, b)
				}
			}
			base.checkDiscardedClosed(t)
		})
	}
}

func TestBodyWithoutGetBodyNotRetried(t *testing.T) {
	s, srv := serve(t, reply{status: 429, header: map[string]string{"Retry-After": "1"}}, reply{})
	tr, _ := newTransport(newFakeTime(), randZero)
	req, _ := http.NewRequest(http.MethodPut, srv.URL, io.NopCloser(strings.NewReader("x")))
	if req.GetBody != nil {
		t.Fatal("test needs a request without GetBody")
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || s.hits.Load() != 1 {
		t.Errorf("got %d after %d hits, want 429 after 1", resp.StatusCode, s.hits.Load())
	}
}

// TestDeadlineShorterThanAsk: the wait would pass the deadline, so the
// 429 comes back at once, body intact.
func TestDeadlineShorterThanAsk(t *testing.T) {
	s, srv := serve(t, reply{status: 429, header: map[string]string{"Retry-After": "5"}, body: "wait 5s"}, reply{})
	ft := newFakeTime()
	tr, _ := newTransport(ft, randZero)
	ctx, cancel := context.WithDeadline(context.Background(), ft.Now().Add(4*time.Second))
	defer cancel()
	resp := get(t, tr, ctx, srv.URL)
	if got := readBody(t, resp); resp.StatusCode != 429 || got != "wait 5s" {
		t.Errorf("got %d %q, want the 429 with its body", resp.StatusCode, got)
	}
	if len(ft.Sleeps()) != 0 || s.hits.Load() != 1 {
		t.Errorf("slept %v, %d hits; want no sleep, 1 hit", ft.Sleeps(), s.hits.Load())
	}

	// With a deadline past the ask, the same exchange retries.
	ft2 := newFakeTime()
	tr2, _ := newTransport(ft2, randZero)
	ctx2, cancel2 := context.WithDeadline(context.Background(), ft2.Now().Add(6*time.Second))
	defer cancel2()
	resp = get(t, tr2, ctx2, srv.URL)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("with room before the deadline: got %d, want 200", resp.StatusCode)
	}
}

// TestClientTimeout: http.Client.Timeout is a context deadline, so an ask
// beyond it returns the 429 at once.
func TestClientTimeout(t *testing.T) {
	s, srv := serve(t, reply{status: 429, header: map[string]string{"Retry-After": "5"}, body: "wait 5s"}, reply{})
	ft := newFakeTime()
	tr, _ := newTransport(ft, randZero)
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); resp.StatusCode != 429 || got != "wait 5s" || len(ft.Sleeps()) != 0 || s.hits.Load() != 1 {
		t.Errorf("got %d %q after %d hits, slept %v; want the 429 at once", resp.StatusCode, got, s.hits.Load(), ft.Sleeps())
	}
}

func TestMaxWait(t *testing.T) {
	_, srv := serve(t, reply{status: 429, header: map[string]string{"Retry-After": "61"}, body: "later"}, reply{})
	ft := newFakeTime()
	tr, _ := newTransport(ft, randZero)
	tr.DisableHostGate = true
	resp := get(t, tr, context.Background(), srv.URL)
	if readBody(t, resp); resp.StatusCode != 429 || len(ft.Sleeps()) != 0 {
		t.Errorf("ask over the default MaxWait: got %d, slept %v", resp.StatusCode, ft.Sleeps())
	}
	_, srv = serve(t, reply{status: 429, header: map[string]string{"Retry-After": "61"}, body: "later"}, reply{})
	tr.MaxWait = 61 * time.Second
	resp = get(t, tr, context.Background(), srv.URL)
	if readBody(t, resp); resp.StatusCode != 200 || len(ft.Sleeps()) != 1 {
		t.Errorf("MaxWait 61s: got %d, slept %v", resp.StatusCode, ft.Sleeps())
	}
}

// TestCancelDuringSleep uses the real sleep: the context is canceled once
// the Transport starts waiting an hour, and RoundTrip must return at once
// with the context's error and the 429's body closed.
func TestCancelDuringSleep(t *testing.T) {
	_, srv := serve(t, reply{status: 429, header: map[string]string{"Retry-After": "3600"}, body: "later"}, reply{})
	base := &trackingRT{base: http.DefaultTransport}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan time.Duration, 1)
	tr := &Transport{Base: base, MaxWait: 2 * time.Hour, DisableHostGate: true,
		sleep: func(ctx context.Context, d time.Duration) error {
			started <- d
			return sleepContext(ctx, d) // the real sleep
		}}
	go func() {
		<-started
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if !errors.Is(err, context.Canceled) || resp != nil {
		t.Fatalf("got %v, %v; want nil, context.Canceled", resp, err)
	}
	base.mu.Lock()
	defer base.mu.Unlock()
	if len(base.bodies) != 1 || !base.bodies[0].closed.Load() {
		t.Errorf("the 429's body was not closed")
	}
}

func TestMaxRetries(t *testing.T) {
	for _, tc := range []struct {
		maxRetries int
		wantHits   int64
	}{{0, DefaultMaxRetries + 1}, {1, 2}, {5, 6}, {-1, 1}} {
		t.Run(fmt.Sprint(tc.maxRetries), func(t *testing.T) {
			s, srv := serve(t, reply{status: 429, header: map[string]string{"Retry-After": "1"}, body: "still no"})
			ft := newFakeTime()
			tr, base := newTransport(ft, randZero)
			tr.MaxRetries = tc.maxRetries
			resp := get(t, tr, context.Background(), srv.URL)
			if got := readBody(t, resp); resp.StatusCode != 429 || got != "still no" {
				t.Errorf("got %d %q, want the last 429 intact", resp.StatusCode, got)
			}
			if n := s.hits.Load(); n != tc.wantHits {
				t.Errorf("server hit %d times, want %d", n, tc.wantHits)
			}
			if n := int64(len(ft.Sleeps())); n != tc.wantHits-1 {
				t.Errorf("slept %d times, want %d", n, tc.wantHits-1)
			}
			base.checkDiscardedClosed(t)
		})
	}
}

func TestStatuses(t *testing.T) {
	ra := map[string]string{"Retry-After": "1"}
	for _, tc := range []struct {
		first reply
		want  int64 // server hits
	}{
		{reply{status: 429}, 2},
		{reply{status: 429, header: ra}, 2},
		{reply{status: 503, header: ra}, 2},
		{reply{status: 503}, 1},
		{reply{status: 503, header: map[string]string{"Retry-After": "x"}}, 1},
		{reply{status: 500, header: ra}, 1},
		{reply{status: 502, header: ra}, 1},
		{reply{status: 403, header: ra}, 1},
		{reply{status: 200, header: ra}, 1},
	} {
		s, srv := serve(t, tc.first, reply{status: 204})
		tr, _ := newTransport(newFakeTime(), randZero)
		tr.DisableHostGate = true
		get(t, tr, context.Background(), srv.URL).Body.Close()
		if n := s.hits.Load(); n != tc.want {
			t.Errorf("%d %v: %d hits, want %d", tc.first.status, tc.first.header, n, tc.want)
		}
	}
}

// failingRT fails its first n calls, then passes to base.
type failingRT struct {
	n     atomic.Int64
	base  http.RoundTripper
	calls atomic.Int64
}

func (f *failingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	f.calls.Add(1)
	if f.n.Add(-1) >= 0 {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errors.New("connection reset")
	}
	return f.base.RoundTrip(req)
}

func TestTransportErrors(t *testing.T) {
	_, srv := serve(t, reply{body: "ok"})
	for _, tc := range []struct {
		name      string
		method    string
		opt       bool
		wantCalls int64
		wantErr   bool
	}{
		{"GET, option on", http.MethodGet, true, 3, false},
		{"GET, option off", http.MethodGet, false, 1, true},
		{"POST, option on", http.MethodPost, true, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &failingRT{base: http.DefaultTransport}
			f.n.Store(2)
			ft := newFakeTime()
			tr := &Transport{Base: f, RetryTransportErrors: tc.opt, now: ft.Now, sleep: ft.Sleep, randN: randMax}
			req, _ := http.NewRequest(tc.method, srv.URL, strings.NewReader("b"))
			resp, err := tr.RoundTrip(req)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			if resp != nil {
				resp.Body.Close()
			}
			if n := f.calls.Load(); n != tc.wantCalls {
				t.Errorf("%d calls, want %d", n, tc.wantCalls)
			}
			if tc.wantCalls == 3 {
				want := []time.Duration{DefaultBaseDelay, 2 * DefaultBaseDelay}
				if got := ft.Sleeps(); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("sleeps %v, want %v", got, want)
				}
			}
		})
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// TestDrainBounded: a discarded body is read at most drainLimit bytes.
func TestDrainBounded(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	_, srv := serve(t, reply{status: 429, header: map[string]string{"Retry-After": "0"}, body: big}, reply{body: "ok"})
	tr, base := newTransport(newFakeTime(), randZero)
	get(t, tr, context.Background(), srv.URL).Body.Close()
	base.mu.Lock()
	defer base.mu.Unlock()
	if got := base.bodies[0].read.Load(); got > drainLimit || got == 0 {
		t.Errorf("drained %d bytes of a discarded body, want 1..%d", got, drainLimit)
	}
	if !base.bodies[0].closed.Load() {
		t.Error("discarded body not closed")
	}
}

func TestRetryableMethods(t *testing.T) {
	for _, tc := range []struct {
		method string
		want   bool
	}{
		{"", true}, {"GET", true}, {"HEAD", true}, {"OPTIONS", true}, {"TRACE", true},
		{"PUT", true}, {"DELETE", true}, {"POST", false}, {"PATCH", false}, {"CONNECT", false},
	} {
		req, _ := http.NewRequest(tc.method, "http://example.test/", nil)
		if got := retryable(req); got != tc.want {
			t.Errorf("retryable(%q) = %v, want %v", tc.method, got, tc.want)
		}
	}
}

// TestZeroValue: the zero Transport works over the real clock and
// http.DefaultTransport.
func TestZeroValue(t *testing.T) {
	s, srv := serve(t, reply{status: 429, header: map[string]string{"RateLimit": `"d";r=0;t=0`}}, reply{body: "ok"})
	client := &http.Client{Transport: &Transport{BaseDelay: time.Millisecond}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); got != "ok" || s.hits.Load() != 2 {
		t.Errorf("got %q after %d hits", got, s.hits.Load())
	}
}

// gatePushingRT answers 429 with Retry-After: 1 on its first call, after
// closing its host's gate for 20 s, as a concurrent request's 429 with
// Retry-After: 20 would while this one is in flight; then 200.
type gatePushingRT struct {
	tr    *Transport
	ft    *fakeTime
	calls atomic.Int64
}

func (g *gatePushingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if g.calls.Add(1) > 1 {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
	}
	g.tr.gates.push(gateKey(req), g.ft.Now(), 20*time.Second)
	h := http.Header{}
	h.Set("Retry-After", "1")
	return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: http.NoBody, Request: req}, nil
}

// TestRetryWaitsForTheGateToo: a retry's wait is the longer of its own
// response's ask and what its host's gate still holds, judged against the
// deadline as one wait: one sleep of 20 s (not 1 s, then the gate's 19 s);
// and with a 10 s deadline the 429 is returned at once, nothing slept
// (not ErrThrottled after a 1 s sleep).
func TestRetryWaitsForTheGateToo(t *testing.T) {
	for _, deadline := range []time.Duration{0, 10 * time.Second} {
		ft := newFakeTime()
		tr := &Transport{now: ft.Now, sleep: ft.Sleep, randN: randZero}
		base := &gatePushingRT{tr: tr, ft: ft}
		tr.Base = base
		ctx := context.Background()
		if deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, ft.Now().Add(deadline))
			defer cancel()
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://gated.test/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("deadline %v: %v", deadline, err)
		}
		resp.Body.Close()
		wantStatus, wantCalls, wantSleeps := http.StatusOK, int64(2), "[20s]"
		if deadline > 0 {
			wantStatus, wantCalls, wantSleeps = http.StatusTooManyRequests, 1, "[]"
		}
		if resp.StatusCode != wantStatus || base.calls.Load() != wantCalls || fmt.Sprint(ft.Sleeps()) != wantSleeps {
			t.Errorf("deadline %v: status %d after %d calls, sleeps %v; want %d after %d, sleeps %s",
				deadline, resp.StatusCode, base.calls.Load(), ft.Sleeps(), wantStatus, wantCalls, wantSleeps)
		}
	}
}

// cancellingRT cancels the request's context, then fails as a reset
// connection would.
type cancellingRT struct {
	cancel context.CancelFunc
	calls  atomic.Int64
}

var errReset = errors.New("connection reset")

func (c *cancellingRT) RoundTrip(*http.Request) (*http.Response, error) {
	c.calls.Add(1)
	c.cancel()
	return nil, errReset
}

// TestTransportErrorAfterContextEnded: with RetryTransportErrors, a
// transport error once the request's context has ended is returned as it
// is, at once: no retry, no backoff, not the context's error.
func TestTransportErrorAfterContextEnded(t *testing.T) {
	ft := newFakeTime()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := &cancellingRT{cancel: cancel}
	tr := &Transport{Base: base, RetryTransportErrors: true, now: ft.Now, sleep: ft.Sleep, randN: randMax}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://reset.test/", nil)
	resp, err := tr.RoundTrip(req)
	if resp != nil || !errors.Is(err, errReset) || base.calls.Load() != 1 || len(ft.Sleeps()) != 0 {
		t.Errorf("got %v, %v after %d calls, sleeps %v; want nil, %v after 1 call, no sleep", resp, err, base.calls.Load(), ft.Sleeps(), errReset)
	}
}
