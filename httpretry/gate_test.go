package httpretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHostGate: a 429 with Retry-After: 30 to a request that is not
// retried still holds later requests to the host back until then.
func TestHostGate(t *testing.T) {
	s, srv := serve(t, reply{status: 429, header: map[string]string{"Retry-After": "30"}}, reply{body: "ok"})
	ft := newFakeTime()
	tr, _ := newTransport(ft, randMax)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	// A request with too short a deadline fails fast and sends nothing.
	ctx, cancel := context.WithDeadline(context.Background(), ft.Now().Add(10*time.Second))
	defer cancel()
	body := &closeRecorder{Reader: strings.NewReader("y")}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPut, srv.URL, body)
	if _, err := tr.RoundTrip(req); !errors.Is(err, ErrThrottled) {
		t.Fatalf("short deadline: err = %v, want ErrThrottled", err)
	}
	if !body.closed {
		t.Error("short deadline: request body not closed")
	}

	// Concurrent requests wait for the gate (plus at most BaseDelay of
	// jitter), then each reaches the server once.
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := get(t, tr, context.Background(), srv.URL)
			resp.Body.Close()
		}()
	}
	wg.Wait()
	if hits := s.hits.Load(); hits != 1+n {
		t.Errorf("server hit %d times, want %d", hits, 1+n)
	}
	sleeps := ft.Sleeps()
	if len(sleeps) == 0 {
		t.Fatal("no request waited for the gate")
	}
	// The first waiter waited the whole 30 s plus the jitter (randMax);
	// later ones waited what was left, never going before the gate.
	if want := 30*time.Second + DefaultBaseDelay; sleeps[0] != want {
		t.Errorf("first gate wait %v, want %v", sleeps[0], want)
	}

	// Another host is not gated.
	_, other := serve(t, reply{body: "ok"})
	before := len(ft.Sleeps())
	get(t, tr, context.Background(), other.URL).Body.Close()
	if len(ft.Sleeps()) != before {
		t.Error("a request to another host waited")
	}
}

// TestHostGateNeverEarly runs concurrent requests against a gate with the
// fake clock and checks that none reaches the server before the gate.
func TestHostGateNeverEarly(t *testing.T) {
	ft := newFakeTime()
	var gateAt time.Time
	var early atomic.Int64
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := false
		once.Do(func() { first = true; gateAt = ft.Now().Add(20 * time.Second) })
		if first {
			w.Header().Set("Retry-After", "20")
			w.WriteHeader(429)
			return
		}
		if ft.Now().Before(gateAt) {
			early.Add(1)
		}
	}))
	defer srv.Close()
	tr, _ := newTransport(ft, lockedRand(7))
	// A POST is not retried, so the fake clock is still at the 429 when the
	// GETs start: without the gate they would reach the server early.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 429 {
		t.Fatalf("first request: %v, %v", resp, err)
	}
	resp.Body.Close()
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			get(t, tr, context.Background(), srv.URL).Body.Close()
		}()
	}
	wg.Wait()
	if n := early.Load(); n != 0 {
		t.Errorf("%d requests reached the server before the gate", n)
	}
}

// TestHostGatesBounded: the gates' memory must not grow with the number of
// hosts that ever asked for a long wait. A client that talks to many
// hosts (a crawler, or one server under many names, as with wildcard DNS)
// and gets "Retry-After: 86400" from each kept an entry per host for a day;
// asks are server-chosen and reach 292 years, so "entries in the past are
// dropped" alone bounded nothing.
func TestHostGatesBounded(t *testing.T) {
	var g hostGates
	now := time.Now()
	const hosts = 3 * maxGates
	for i := range hosts {
		g.push(fmt.Sprintf("https://h%d.example", i), now, 24*time.Hour+time.Duration(i)*time.Second)
	}
	g.mu.Lock()
	n := len(g.until)
	g.mu.Unlock()
	if n > maxGates {
		t.Errorf("%d hosts asked for a day's wait: %d gates kept, want at most %d", hosts, n, maxGates)
	}
	// The gates kept are those that stay closed longest (a gate that is
	// dropped only lets a request through sooner than the host asked, so
	// drop the one that opens first), and the newest host is among them.
	last := fmt.Sprintf("https://h%d.example", hosts-1)
	if got, want := g.remaining(last, now), 24*time.Hour+(hosts-1)*time.Second; got != want {
		t.Errorf("newest gate: %v left, want %v", got, want)
	}
	if got := g.remaining("https://h0.example", now); got != 0 {
		t.Errorf("the gate that opens first was kept (%v left) while the table was full", got)
	}
	// Expired gates still go first: after the day, new hosts find room
	// without evicting anything still closed.
	later := now.Add(48*time.Hour + hosts*time.Second)
	g.push("https://fresh.example", later, time.Minute)
	g.mu.Lock()
	n = len(g.until)
	g.mu.Unlock()
	if n != 1 {
		t.Errorf("after every gate expired: %d gates kept, want 1", n)
	}
}

// TestHostGateCappedAtMaxWait: an absurd ask shuts the host for MaxWait,
// not for the Transport's lifetime, and the request that got it is not
// retried.
func TestHostGateCappedAtMaxWait(t *testing.T) {
	s, srv := serve(t, reply{status: 429, header: map[string]string{"Retry-After": "100000000"}}, reply{body: "ok"})
	ft := newFakeTime()
	tr, _ := newTransport(ft, randZero)
	resp := get(t, tr, context.Background(), srv.URL)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d: a wait beyond MaxWait must return the 429", resp.StatusCode)
	}
	resp.Body.Close()
	resp = get(t, tr, context.Background(), srv.URL)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || s.hits.Load() != 2 {
		t.Fatalf("status %d after %d hits: the gate should open after MaxWait", resp.StatusCode, s.hits.Load())
	}
	if sleeps := ft.Sleeps(); len(sleeps) != 1 || sleeps[0] != DefaultMaxWait {
		t.Fatalf("waits %v, want one of MaxWait (%v)", sleeps, DefaultMaxWait)
	}
}

// TestHostGateJitterWithinLimits: a gate that opens within MaxWait and
// the deadline is waited for whatever the jitter draws; the jitter is cut
// to the room they leave, and never sends a request before the gate.
func TestHostGateJitterWithinLimits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ask      string        // the 429's Retry-After
		maxWait  time.Duration // Transport.MaxWait
		deadline time.Duration // from the second request's start; 0: none
		randN    func(int64) int64
		want     time.Duration // the second request's wait
	}{
		{"gate at MaxWait", "1", time.Second, 0, randMax, time.Second},
		{"gate at MaxWait, half jitter", "1", time.Second, 0, randHalf, time.Second},
		{"default MaxWait", "60", 0, 0, randMax, DefaultMaxWait},
		{"room for part of the jitter", "1", time.Second + 30*time.Millisecond, 0, randMax, time.Second + 30*time.Millisecond},
		{"deadline just after the gate", "30", 0, 30*time.Second + 40*time.Millisecond, randMax, 30*time.Second + 40*time.Millisecond - 1},
		{"room for all of the jitter", "1", 2 * time.Second, 0, randMax, time.Second + DefaultBaseDelay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, srv := serve(t, reply{status: 429, header: map[string]string{"Retry-After": tc.ask}}, reply{body: "ok"})
			ft := newFakeTime()
			tr, _ := newTransport(ft, tc.randN)
			tr.MaxWait = tc.maxWait
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x")) // not retried: sets the gate
			resp, err := tr.RoundTrip(req)
			if err != nil || resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("first request: %v %v", resp, err)
			}
			resp.Body.Close()
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, ft.Now().Add(tc.deadline))
				defer cancel()
			}
			req, _ = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			resp, err = tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("a gate within MaxWait and the deadline failed: %v", err)
			}
			resp.Body.Close()
			if sleeps := ft.Sleeps(); len(sleeps) != 1 || sleeps[0] != tc.want || s.hits.Load() != 2 {
				t.Fatalf("waits %v and %d hits, want one wait of %v and 2 hits", sleeps, s.hits.Load(), tc.want)
			}
		})
	}
}

// TestHostGateConcurrentPush: another request's answer can close the gate
// at any moment, for up to MaxWait after its own clock reading. A request
// whose clock reading is older than that push (it read the clock, was
// descheduled, and then looked at the gate) must not see the gate further
// than MaxWait away: not before sending (an ErrThrottled), nor after a
// 429 it could retry within MaxWait (its 429 returned, not retried). The
// push is made from inside the clock reading, the one point where the
// interleaving matters, so the test is deterministic.
func TestHostGateConcurrentPush(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replies []reply
		reads   int // the clock reading after which the push lands
		hits    int64
	}{
		{"before sending", []reply{{body: "ok"}}, 1, 1},
		{"after a 429", []reply{{status: 429, header: map[string]string{"Retry-After": "1"}}, {body: "ok"}}, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, srv := serve(t, tc.replies...)
			ft := newFakeTime()
			tr, _ := newTransport(ft, randZero)
			tr.MaxWait = 10 * time.Second
			host := srv.URL
			tr.gates.push(host, ft.Now().Add(-time.Hour), time.Second) // a gate that opened long ago
			reads := 0
			tr.now = func() time.Time {
				now := ft.Now()
				if reads++; reads == tc.reads {
					// Another request, 5 s later, is told to wait longer
					// than MaxWait: it closes the gate for MaxWait.
					ft.mu.Lock()
					ft.now = ft.now.Add(5 * time.Second)
					ft.mu.Unlock()
					tr.gates.push(host, now.Add(5*time.Second), tr.MaxWait)
				}
				return now
			}
			req, err := http.NewRequest("GET", srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("the gate opens within MaxWait of every clock reading after it closed: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || s.hits.Load() != tc.hits {
				t.Fatalf("status %d after %d hits, want 200 after %d", resp.StatusCode, s.hits.Load(), tc.hits)
			}
			for _, d := range ft.Sleeps() {
				if d > tr.MaxWait {
					t.Fatalf("waited %v, beyond MaxWait %v", d, tr.MaxWait)
				}
			}
		})
	}
}
