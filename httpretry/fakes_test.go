package httpretry

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTime is an injected clock and sleep: sleeping records the duration
// and advances the clock by it, so tests check exact waits without
// sleeping.
type fakeTime struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeTime() *fakeTime {
	// Start at the real time so that contexts with real deadlines, which
	// the fake clock is compared against, line up with it.
	return &fakeTime{now: time.Now()}
}

func (f *fakeTime) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeTime) Sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.sleeps = append(f.sleeps, d)
	f.now = f.now.Add(d)
	f.mu.Unlock()
	return ctx.Err()
}

func (f *fakeTime) Sleeps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sleeps...)
}

// lockedRand is a seeded, goroutine-safe randN.
func lockedRand(seed uint64) func(int64) int64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func(n int64) int64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Int64N(n)
	}
}

func randZero(int64) int64 { return 0 }

func randMax(n int64) int64 { return n - 1 }

func randHalf(n int64) int64 { return n / 2 }

// reply is one scripted server response.
type reply struct {
	status int
	header map[string]string
	body   string
}

// script serves replies in order (the last one repeats) and records what
// it received.
type script struct {
	t       *testing.T
	mu      sync.Mutex
	replies []reply
	methods []string
	bodies  []string
	hits    atomic.Int64
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("server: reading body: %v", err)
	}
	s.mu.Lock()
	n := int(s.hits.Add(1)) - 1
	s.methods = append(s.methods, r.Method)
	s.bodies = append(s.bodies, string(b))
	rep := s.replies[min(n, len(s.replies)-1)]
	s.mu.Unlock()
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, rep.body)
}

func (s *script) Bodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// serve starts an httptest server that plays replies.
func serve(t *testing.T, replies ...reply) (*script, *httptest.Server) {
	t.Helper()
	s := &script{t: t, replies: replies}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// newTransport returns a Transport on the fake clock and the given
// random source, with a tracking Base.
func newTransport(ft *fakeTime, randN func(int64) int64) (*Transport, *trackingRT) {
	base := &trackingRT{base: http.DefaultTransport}
	return &Transport{Base: base, now: ft.Now, sleep: ft.Sleep, randN: randN}, base
}

// trackingRT wraps a RoundTripper and records every response body it
// hands out, to check that discarded ones get closed.
type trackingRT struct {
	base   http.RoundTripper
	mu     sync.Mutex
	bodies []*trackedBody
}

type trackedBody struct {
	io.ReadCloser
	read   atomic.Int64
	closed atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *trackedBody) Close() error {
	b.closed.Store(true)
	return b.ReadCloser.Close()
}

func (rt *trackingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rt.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	tb := &trackedBody{ReadCloser: resp.Body}
	resp.Body = tb
	rt.mu.Lock()
	rt.bodies = append(rt.bodies, tb)
	rt.mu.Unlock()
	return resp, nil
}

// checkDiscardedClosed fails unless every body but the last was closed.
func (rt *trackingRT) checkDiscardedClosed(t *testing.T) {
	t.Helper()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for i, b := range rt.bodies[:max(len(rt.bodies)-1, 0)] {
		if !b.closed.Load() {
			t.Errorf("response %d of %d: body not closed", i+1, len(rt.bodies))
		}
	}
}

func get(t *testing.T, tr http.RoundTripper, ctx context.Context, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	return resp
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
