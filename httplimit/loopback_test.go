package httplimit

import (
	"github.com/hotlimit/hotlimit/admission"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httpretry"
)

// TestLoopback drives the middleware through a real net/http server on
// loopback with real clients, one connection each: at one instant (a
// ManualClock) exactly the capacity passes across concurrent connections,
// the admitted responses count r down from capacity-1 to 0, every 429 is
// exact (status, body, Retry-After, RateLimit fields), and a client that
// waits Retry-After and retries is admitted.
func TestLoopback(t *testing.T) {
	const capacity, conns = 20, 60
	clock := hotlimit.NewManualClock()
	clock.Set(1000 * time.Second)
	m, err := New(Config{
		Limits:       map[string]hotlimit.Policy{"api": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(capacity), Burst: capacity}},
		Groups:       []Group{{Name: "api", Limit: "api"}},
		DefaultGroup: "api",
		Key:          TokenKey("Authorization"),
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		io.WriteString(w, "ok\n")
	})))
	defer srv.Close()

	type result struct {
		code int
		h    http.Header
		body string
	}
	send := func(c *http.Client) (result, error) {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/things", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			return result{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return result{resp.StatusCode, resp.Header, string(b)}, err
	}
	results := make([]result, conns)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{DisableKeepAlives: true}
			defer tr.CloseIdleConnections()
			<-start
			res, err := send(&http.Client{Transport: tr})
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}

	var rs []int
	denied := 0
	// T = 3 s: after capacity admissions at one instant, the next unit
	// comes back in exactly 3 s.
	for _, res := range results {
		switch res.code {
		case http.StatusOK:
			name, r, tt := parseRateLimit(t, res.h.Get("RateLimit"))
			// The next unit comes back 3 s after the instant of the burst.
			if name != "api" || tt != 3 || res.h.Get("Retry-After") != "" {
				t.Errorf("admitted: RateLimit %q, Retry-After %q", res.h.Get("RateLimit"), res.h.Get("Retry-After"))
			}
			rs = append(rs, int(r))
		case http.StatusTooManyRequests:
			denied++
			if res.h.Get("RateLimit") != `"api";r=0;t=3` || res.h.Get("Retry-After") != "3" ||
				res.h.Get("RateLimit-Policy") != `"api";q=20;w=60` || res.h.Get("Content-Type") != "application/json" ||
				res.body != `{"error":"rate_limit_exceeded","retry_after":3}`+"\n" {
				t.Errorf("429: headers %v, body %q", res.h, res.body)
			}
		default:
			t.Errorf("status %d", res.code)
		}
	}
	sort.Ints(rs)
	if len(rs) != capacity || denied != conns-capacity || calls != capacity {
		t.Fatalf("%d admitted, %d denied, %d handler calls; want %d, %d, %d", len(rs), denied, calls, capacity, conns-capacity, capacity)
	}
	for i, r := range rs {
		if r != i {
			t.Fatalf("admitted r values %v, want 0..%d once each", rs, capacity-1)
		}
	}

	// A client that waits Retry-After (on the limiter's clock) is admitted;
	// one nanosecond earlier it is not.
	c := &http.Client{}
	defer c.CloseIdleConnections()
	ra := results[0].h.Get("Retry-After")
	for _, res := range results {
		if res.code == http.StatusTooManyRequests {
			ra = res.h.Get("Retry-After")
		}
	}
	secs, _ := strconv.Atoi(ra)
	clock.Advance(time.Duration(secs)*time.Second - 1)
	if res, err := send(c); err != nil || res.code != http.StatusTooManyRequests {
		t.Fatalf("1 ns before Retry-After: %d %v", res.code, err)
	}
	clock.Advance(1)
	if res, err := send(c); err != nil || res.code != http.StatusOK || res.h.Get("RateLimit") != `"api";r=0;t=3` {
		t.Fatalf("after Retry-After: %d %q %v", res.code, res.h.Get("RateLimit"), err)
	}
}

// TestNeverNotRetried: over a real connection, a request that can never
// pass (it costs more than the limit holds) gets 403 Forbidden without
// Retry-After, which an httpretry client does not retry.
func TestNeverNotRetried(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	m, err := New(Config{
		Limits: map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 2, Window: time.Hour}},
		Groups: []Group{
			{Name: "big", Patterns: []string{"/big"}, Limit: "l", CostFunc: fixedCost(3)},
			{Name: "small", Limit: "l"},
		},
		DefaultGroup: "small",
		Key:          TokenKey("Authorization"),
		Hook: func(e admission.Event) {
			mu.Lock()
			seen[e.Group]++
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()
	c := &http.Client{Transport: &httpretry.Transport{}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest("GET", srv.URL+"/big", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Retry-After") != "" || seen["big"] != 1 {
		t.Fatalf("never: status %d, Retry-After %q, %d attempts; want 403, none, 1",
			resp.StatusCode, resp.Header.Get("Retry-After"), seen["big"])
	}
	if _, asks := httpretry.ServerWait(resp, time.Now()); asks {
		t.Errorf("the 403 asks the client to wait")
	}
}
