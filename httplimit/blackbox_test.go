// Black-box tests: the middleware seen from outside, through its exported
// API and real responses only, as an outside HTTP test suite sees it.

package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/hotlimit/hotlimit/admission"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/hotlimit/hotlimit/httpretry"
	"github.com/hotlimit/hotlimit/internal/sfv"
)

// bbServer is a middleware on a ManualClock, driven through ServeHTTP.
type bbServer struct {
	clock *hotlimit.ManualClock
	h     http.Handler
	calls int
}

func newBB(t *testing.T, cfg httplimit.Config) *bbServer {
	t.Helper()
	s := &bbServer{clock: hotlimit.NewManualClock()}
	s.clock.Set(1000*time.Second + 123*time.Millisecond)
	cfg.Wait = func(context.Context, time.Duration) error { return nil } // shaping delays are not slept
	cfg.Backend = admission.LocalBackend(hotlimit.WithClock(s.clock), hotlimit.WithSweepInterval(0))
	m, err := httplimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	s.h = m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.calls++ }))
	return s
}

func (s *bbServer) get(cost int64) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/x", nil)
	r.RemoteAddr = "192.0.2.7:1234"
	r.Header.Set("X-Cost", strconv.FormatInt(cost, 10))
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, r)
	return w
}

func headerCost(r *http.Request) (int64, error) {
	return strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
}

// checkFields parses RateLimit-Policy and RateLimit strictly and checks
// the draft's shapes; it returns RateLimit's items by name.
func checkFields(t *testing.T, h http.Header) map[string]sfv.Params {
	t.Helper()
	pol, err := sfv.ParseList(joinLines(h.Values("RateLimit-Policy")))
	if err != nil || len(pol) == 0 {
		t.Fatalf("RateLimit-Policy %q: %v", h.Values("RateLimit-Policy"), err)
	}
	names := map[string]bool{}
	for _, m := range pol {
		if m.IsInner || m.Value.Kind != sfv.String {
			t.Fatalf("RateLimit-Policy item %+v is not a String", m)
		}
		q, ok := m.Params.Get("q")
		if !ok || q.Kind != sfv.Integer || q.Int < 0 {
			t.Fatalf("RateLimit-Policy item %q: q %+v", m.Value.Str, q)
		}
		if w, ok := m.Params.Get("w"); ok && (w.Kind != sfv.Integer || w.Int <= 0) {
			t.Fatalf("RateLimit-Policy item %q: w %+v", m.Value.Str, w)
		}
		names[m.Value.Str] = true
	}
	rl, err := sfv.ParseList(joinLines(h.Values("RateLimit")))
	if err != nil || len(rl) == 0 {
		t.Fatalf("RateLimit %q: %v", h.Values("RateLimit"), err)
	}
	out := map[string]sfv.Params{}
	for _, m := range rl {
		if m.IsInner || m.Value.Kind != sfv.String || !names[m.Value.Str] {
			t.Fatalf("RateLimit item %+v: not a String naming a policy of %q", m, h.Values("RateLimit-Policy"))
		}
		r, ok := m.Params.Get("r")
		if !ok || r.Kind != sfv.Integer || r.Int < 0 {
			t.Fatalf("RateLimit item %q: r %+v", m.Value.Str, r)
		}
		if tt, ok := m.Params.Get("t"); ok && (tt.Kind != sfv.Integer || tt.Int < 0) {
			t.Fatalf("RateLimit item %q: t %+v", m.Value.Str, tt)
		}
		out[m.Value.Str] = m.Params
	}
	return out
}

func joinLines(v []string) string {
	s := ""
	for i, l := range v {
		if i > 0 {
			s += ", "
		}
		s += l
	}
	return s
}

// TestBlackBoxRetryAfterNeverEarly: a client that waits exactly Retry-After
// is admitted when nothing else consumed, for every algorithm, several
// costs, with and without a global layer.
func TestBlackBoxRetryAfterNeverEarly(t *testing.T) {
	policies := map[string]hotlimit.Policy{
		"tb":  hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 3, Per: 7 * time.Second}, Burst: 5},
		"lb":  hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 3, Per: 7 * time.Second}, Capacity: 4},
		"fw":  hotlimit.FixedWindow{Limit: 5, Window: 7 * time.Second},
		"sw":  hotlimit.SlidingWindow{Limit: 5, Window: 7 * time.Second},
		"sl":  hotlimit.SlidingLog{Limit: 5, Window: 7 * time.Second},
		"glo": hotlimit.SlidingWindow{Limit: 7, Window: 11 * time.Second},
	}
	for _, name := range []string{"tb", "lb", "fw", "sw", "sl"} {
		for _, global := range []string{"", "glo", name} {
			for _, cost := range []int64{1, 2, 5} {
				t.Run(fmt.Sprintf("%s/global=%s/cost=%d", name, global, cost), func(t *testing.T) {
					s := newBB(t, httplimit.Config{
						Limits:       policies,
						Global:       global,
						Groups:       []httplimit.Group{{Name: "g", Limit: name, CostFunc: headerCost}},
						DefaultGroup: "g",
						Key:          httplimit.IPKey(nil),
					})
					for round := 0; round < 6; round++ {
						var w *httptest.ResponseRecorder
						for i := 0; i < 40; i++ {
							if w = s.get(cost); w.Code != http.StatusOK {
								break
							}
						}
						if w.Code != http.StatusTooManyRequests {
							t.Fatalf("round %d: status %d, want 429", round, w.Code)
						}
						items := checkFields(t, w.Header())
						ra, err := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
						if err != nil || ra < 1 {
							t.Fatalf("Retry-After %q", w.Header().Get("Retry-After"))
						}
						// An item the request exceeded has a t, and
						// Retry-After does not end before it (draft-11,
						// section 6).
						for item, ps := range items {
							need := int64(1) // the global layer's cost
							if item == name {
								need = cost
							}
							r, _ := ps.Get("r")
							tt, hasT := ps.Get("t")
							if r.Int < need && (!hasT || tt.Int > ra) {
								t.Fatalf("item %q: r=%d < %d with t %+v, Retry-After %d", item, r.Int, need, tt, ra)
							}
						}
						s.clock.Advance(time.Duration(ra) * time.Second)
						if w := s.get(cost); w.Code != http.StatusOK {
							t.Fatalf("round %d: after Retry-After %d s: status %d, headers %v", round, ra, w.Code, w.Header())
						}
						s.clock.Advance(time.Duration(round*317) * time.Millisecond)
					}
				})
			}
		}
	}
}

// TestBlackBoxNeverAndProblem: a cost above capacity is 403 without
// Retry-After, a quota-exceeded problem body naming the violated limit;
// a 429's body names the limits that refused it, and bad costs are 400.
func TestBlackBoxNeverAndProblem(t *testing.T) {
	s := newBB(t, httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"per-ip": hotlimit.FixedWindow{Limit: 4, Window: 10 * time.Second},
			"all":    hotlimit.FixedWindow{Limit: 4, Window: 10 * time.Second},
		},
		Global:         "all",
		Groups:         []httplimit.Group{{Name: "g", Limit: "per-ip", CostFunc: headerCost}},
		DefaultGroup:   "g",
		Key:            httplimit.IPKey(nil),
		ProblemDetails: true,
	})
	w := s.get(5)
	if w.Code != http.StatusForbidden || w.Header().Get("Retry-After") != "" {
		t.Fatalf("cost 5 > 4: status %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	p := problem(t, w)
	if p.Status != 403 || len(p.Violated) != 1 || p.Violated[0] != "per-ip" {
		t.Fatalf("403 body %+v", p)
	}
	checkFields(t, w.Header())
	for i := 0; i < 4; i++ {
		if w := s.get(1); w.Code != 200 {
			t.Fatalf("request %d: %d", i, w.Code)
		}
	}
	w = s.get(1)
	if w.Code != 429 {
		t.Fatalf("5th: %d", w.Code)
	}
	p = problem(t, w)
	// Both layers are exhausted: the group's (per-ip) and the global one
	// (all/global or all), and the body names every one the fields name.
	items := checkFields(t, w.Header())
	if p.Status != 429 || len(p.Violated) != len(items) {
		t.Fatalf("429 body %+v, RateLimit %q", p, w.Header().Values("RateLimit"))
	}
	for _, v := range p.Violated {
		if _, ok := items[v]; !ok {
			t.Fatalf("violated %q is not a RateLimit item: %q", v, w.Header().Values("RateLimit"))
		}
	}
	for _, c := range []string{"-1", "x", "", "99999999999999999999"} {
		r := httptest.NewRequest("GET", "/x", nil)
		r.RemoteAddr = "192.0.2.8:1"
		r.Header.Set("X-Cost", c)
		w := httptest.NewRecorder()
		s.h.ServeHTTP(w, r)
		if w.Code != http.StatusBadRequest || w.Header().Get("Retry-After") != "" {
			t.Fatalf("cost %q: status %d", c, w.Code)
		}
	}
}

type problemJSON struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Violated []string `json:"violated-policies"`
}

func problem(t *testing.T, w *httptest.ResponseRecorder) problemJSON {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var p problemJSON
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" || p.Title == "" || p.Status != w.Code {
		t.Fatalf("problem %+v for status %d", p, w.Code)
	}
	return p
}

// TestBlackBoxHugeCosts: costs far above every capacity, up to MaxInt64, are
// a 403 with well-formed fields for every algorithm, and consume nothing.
func TestBlackBoxHugeCosts(t *testing.T) {
	for _, name := range []string{"tb", "lb", "fw", "sw", "sl"} {
		for _, cost := range []int64{1 << 62, 1<<63 - 1, 1 << 31, 999_999_999_999_999} {
			s := newBB(t, httplimit.Config{
				Limits: map[string]hotlimit.Policy{
					"tb": hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 3, Per: 7 * time.Second}, Burst: 5},
					"lb": hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 3, Per: 7 * time.Second}, Capacity: 4},
					"fw": hotlimit.FixedWindow{Limit: 5, Window: 7 * time.Second},
					"sw": hotlimit.SlidingWindow{Limit: 5, Window: 7 * time.Second},
					"sl": hotlimit.SlidingLog{Limit: 5, Window: 7 * time.Second},
				},
				Global:         "fw",
				Groups:         []httplimit.Group{{Name: "g", Limit: name, CostFunc: headerCost}},
				DefaultGroup:   "g",
				Key:            httplimit.IPKey(nil),
				ProblemDetails: true,
				Headers:        httplimit.HeadersBoth,
			})
			w := s.get(cost)
			if w.Code != http.StatusForbidden {
				t.Errorf("%s cost %d: %d %v", name, cost, w.Code, w.Header())
				continue
			}
			checkFields(t, w.Header())
			if w := s.get(1); w.Code != 200 {
				t.Errorf("%s: after a 403, cost 1: %d", name, w.Code)
			}
		}
	}
}

// TestBlackBoxClientIPSpoofing: the identity IPKey gives requests with
// forged, odd and malformed forwarding headers.
func TestBlackBoxClientIPSpoofing(t *testing.T) {
	xff, err := admission.NewClientIP([]string{"10.0.0.0/8", "2001:db8:ffff::/48"}, "X-Forwarded-For", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := admission.NewClientIP([]string{"10.0.0.0/8", "::ffff:172.16.0.0/108"}, "Forwarded", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		c     *admission.ClientIP
		peer  string
		lines []string // header lines (X-Forwarded-For or Forwarded, by c)
		want  string   // identity, or "" for ErrNoClientIP
	}{
		{nil, "10.0.0.1:1", []string{"203.0.113.5"}, "ip:10.0.0.1"},
		{xff, "198.51.100.1:1", []string{"203.0.113.5"}, "ip:198.51.100.1"}, // untrusted peer
		{xff, "10.0.0.1:1", []string{"1.1.1.1, 203.0.113.5"}, "ip:203.0.113.5"},
		{xff, "10.0.0.1:1", []string{"203.0.113.5, 10.0.0.2"}, "ip:203.0.113.5"},
		{xff, "10.0.0.1:1", []string{"garbage, 203.0.113.5"}, "ip:203.0.113.5"},
		{xff, "10.0.0.1:1", []string{"203.0.113.5, garbage"}, "ip:10.0.0.1"},
		{xff, "10.0.0.1:1", []string{"203.0.113.5, unknown, 10.0.0.2"}, "ip:10.0.0.2"},
		{xff, "10.0.0.1:1", []string{"10.0.0.3, 10.0.0.2"}, "ip:10.0.0.3"},
		{xff, "10.0.0.1:1", []string{"1.1.1.1", "203.0.113.5"}, "ip:203.0.113.5"},
		{xff, "10.0.0.1:1", []string{"203.0.113.5", "garbage"}, "ip:10.0.0.1"},
		{xff, "10.0.0.1:1", []string{`"`, "203.0.113.5"}, "ip:203.0.113.5"},
		{xff, "10.0.0.1:1", []string{`", 203.0.113.5`}, "ip:203.0.113.5"},
		{xff, "10.0.0.1:1", []string{"[2001:db8::1]:443"}, "ip:2001:db8::/64"},
		{xff, "10.0.0.1:1", []string{"2001:db8:1:2:3::1%eth0"}, "ip:2001:db8:1:2::/64"},
		{xff, "10.0.0.1:1", []string{"::ffff:203.0.113.5"}, "ip:203.0.113.5"},
		{xff, "10.0.0.1:1", []string{"203.0.113.5, ::ffff:10.0.0.9"}, "ip:203.0.113.5"},
		{xff, "10.0.0.1:1", []string{"203.0.113.5:99999"}, "ip:10.0.0.1"},
		{xff, "10.0.0.1:1", []string{"203.0.113.5:80"}, "ip:203.0.113.5"},
		{xff, "10.0.0.1:1", []string{" 203.0.113.5 ,, "}, "ip:203.0.113.5"},
		{xff, "10.0.0.1:1", []string{"0203.0.113.5"}, "ip:10.0.0.1"},
		{xff, "10.0.0.1:1", []string{"203.0.113.5/24"}, "ip:10.0.0.1"},
		{xff, "10.0.0.1:1", []string{"[203.0.113.5]"}, "ip:10.0.0.1"},
		{xff, "10.0.0.1:1", nil, "ip:10.0.0.1"},
		{xff, "[2001:db8:ffff::1]:5", []string{"2001:db8:aaaa::1"}, "ip:2001:db8:aaaa::/64"},
		{xff, "[::ffff:10.0.0.1]:5", []string{"203.0.113.5"}, "ip:203.0.113.5"},
		{xff, "[fe80::1%eth0]:80", nil, "ip:fe80::/64"},
		{xff, "@", nil, ""},
		{xff, "", nil, ""},
		{xff, "garbage:80", nil, ""},
		{fwd, "10.0.0.1:1", []string{"for=192.0.2.60;proto=http;by=203.0.113.43"}, "ip:192.0.2.60"},
		{fwd, "10.0.0.1:1", []string{`for="[2001:db8:cafe::17]:4711"`}, "ip:2001:db8:cafe::/64"},
		{fwd, "10.0.0.1:1", []string{`For="_hidden", for=198.51.100.17`}, "ip:198.51.100.17"},
		{fwd, "10.0.0.1:1", []string{`for=198.51.100.17, for="_hidden"`}, "ip:10.0.0.1"},
		{fwd, "10.0.0.1:1", []string{`for=[2001:db8::1]`}, "ip:10.0.0.1"},
		{fwd, "10.0.0.1:1", []string{`for="1.2.3.4, for=5.6.7.8"`}, "ip:10.0.0.1"},
		{fwd, "10.0.0.1:1", []string{`proto=https;for=203.0.113.5`}, "ip:203.0.113.5"},
		{fwd, "10.0.0.1:1", []string{`for=1.1.1.1`, `for=203.0.113.5, for=10.0.0.2`}, "ip:203.0.113.5"},
		{fwd, "10.0.0.1:1", []string{`for=203.0.113.5;by=10.0.0.1, proto=http`}, "ip:10.0.0.1"},
		{fwd, "10.0.0.1:1", []string{`for=unknown`}, "ip:10.0.0.1"},
		{fwd, "10.0.0.1:1", []string{`for="\"1.1.1.1"`}, "ip:10.0.0.1"},
		{fwd, "10.0.0.1:1", []string{`for=203.0.113.5, for=172.16.0.9`}, "ip:203.0.113.5"},
		{fwd, "172.16.3.3:1", []string{`for=203.0.113.5`}, "ip:203.0.113.5"},
	}
	for i, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		name, other, decoy := "X-Forwarded-For", "Forwarded", "for=6.6.6.6"
		if c.c == fwd {
			name, other, decoy = "Forwarded", "X-Forwarded-For", "6.6.6.6"
		}
		for _, l := range c.lines {
			r.Header.Add(name, l)
			r.Header.Add(other, decoy) // the header not configured is never read
		}
		id, err := httplimit.IPKey(c.c)(nil, r)
		if c.want == "" {
			if !errors.Is(err, admission.ErrNoClientIP) {
				t.Errorf("case %d (%q, %q): %q, %v; want ErrNoClientIP", i, c.peer, c.lines, id, err)
			}
			continue
		}
		if err != nil || string(id) != c.want {
			t.Errorf("case %d (%q, %q): %q, %v; want %q", i, c.peer, c.lines, id, err, c.want)
		}
	}
}

// TestBlackBoxLoopback64: 64 goroutines over real loopback connections, time
// frozen, mixed costs through httpretry clients that never wait: the
// admitted costs add up to exactly the budget, every other request is a
// 429 (retried, within MaxRetries) or a 403 (never retried: one hit).
func TestBlackBoxLoopback64(t *testing.T) {
	const budget, workers, perWorker = 100, 64, 4
	clock := hotlimit.NewManualClock()
	clock.Set(1000 * time.Second)
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"api": hotlimit.SlidingLog{Limit: budget, Window: time.Minute},
			"all": hotlimit.FixedWindow{Limit: 10 * budget, Window: time.Minute},
		},
		Global:       "all",
		Groups:       []httplimit.Group{{Name: "api", Limit: "api", CostFunc: headerCost}},
		DefaultGroup: "api",
		Key:          httplimit.TokenKey("Authorization"),
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var admitted, hits403, hits atomic.Int64
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := headerCost(r)
		admitted.Add(c)
	})))
	defer srv.Close()
	base := countingRT{rt: srv.Client().Transport, hits: &hits, hits403: &hits403}
	// MaxWait below every Retry-After (at least 1 s): a throttled request
	// comes back at once, as its 429, and is never sent again.
	client := &http.Client{Transport: &httpretry.Transport{Base: base, MaxWait: time.Millisecond, DisableHostGate: true}}
	var wg sync.WaitGroup
	var n429, n403, n200 atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				cost := int64(1 + (w+i)%3)
				if (w+i)%17 == 0 {
					cost = budget + 1
				}
				req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
				req.Header.Set("Authorization", "Bearer one-shared-token")
				req.Header.Set("X-Cost", strconv.FormatInt(cost, 10))
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					n200.Add(1)
				case 429:
					n429.Add(1)
				case 403:
					n403.Add(1)
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	// Whatever the schedule, the concurrent phase left less than 3 units
	// (costs are 1 to 3 and far more was asked for); cost-1 requests in
	// sequence then use up the rest, and the total is the budget exactly.
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
		req.Header.Set("Authorization", "Bearer one-shared-token")
		req.Header.Set("X-Cost", "1")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		hits.Add(-1) // not one of the concurrent requests
		if resp.StatusCode != 200 {
			break
		}
	}
	if got := admitted.Load(); got != budget {
		t.Errorf("admitted cost %d, want exactly %d (200: %d, 429: %d, 403: %d)", got, budget, n200.Load(), n429.Load(), n403.Load())
	}
	if n403.Load() == 0 || hits403.Load() != n403.Load() {
		t.Errorf("403 responses %d, sent to the server %d times", n403.Load(), hits403.Load())
	}
	if total := n200.Load() + n429.Load() + n403.Load(); total != workers*perWorker || hits.Load() != total {
		t.Errorf("%d responses, %d requests reached the server; want %d each", total, hits.Load(), workers*perWorker)
	}
}

type countingRT struct {
	rt            http.RoundTripper
	hits, hits403 *atomic.Int64
}

func (c countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	c.hits.Add(1)
	if err == nil && resp.StatusCode == 403 {
		c.hits403.Add(1)
	}
	return resp, err
}

// TestBlackBoxResetDryRunExempt: Reset frees every layer of an identity and
// no other's; DryRun lets every refusal through without a field or a
// Retry-After; an exempt identity and an exempt group pass unmetered.
func TestBlackBoxResetDryRunExempt(t *testing.T) {
	for _, dry := range []bool{false, true} {
		var events []admission.Outcome
		clock := hotlimit.NewManualClock()
		clock.Set(1000 * time.Second)
		m, err := httplimit.New(httplimit.Config{
			Limits: map[string]hotlimit.Policy{"per": hotlimit.FixedWindow{Limit: 2, Window: time.Minute}},
			Global: "per",
			Groups: []httplimit.Group{
				{Name: "a", Patterns: []string{"/a"}, Limit: "per", CostFunc: httplimit.CostFromContext(-1)},
				{Name: "b", Patterns: []string{"/b"}, Limit: "per"},
				{Name: "h", Patterns: []string{"/h"}, Exempt: true},
			},
			DefaultGroup:     "b",
			Key:              httplimit.TokenKey("Authorization"),
			FallbackToIP:     true,
			ExemptIdentities: []string{httplimit.TokenIdentity("vip")},
			DryRun:           dry,
			Hook:             func(ev admission.Event) { events = append(events, ev.Outcome) },
			Backend:          admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)),
		})
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls++ }))
		do := func(path, tok string, cost int64) *httptest.ResponseRecorder {
			r := httptest.NewRequest("GET", path, nil)
			r.RemoteAddr = "198.51.100.3:9"
			if tok != "" {
				r.Header.Set("Authorization", "Bearer "+tok)
			}
			if cost >= 0 {
				r = r.WithContext(httplimit.WithCost(r.Context(), cost))
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		// Global layer (2) shared by groups a and b: the third request fails.
		codes := []int{do("/a", "t1", 1).Code, do("/b", "t1", -1).Code}
		w := do("/b", "t1", -1)
		codes = append(codes, w.Code, do("/a", "t1", -1).Code, do("/a", "t2", -7).Code)
		want := []int{200, 200, 429, 400, 400}
		if dry {
			want = []int{200, 200, 200, 200, 200}
			if len(w.Header()) != 0 {
				t.Errorf("dry run wrote %v", w.Header())
			}
		}
		if fmt.Sprint(codes) != fmt.Sprint(want) {
			t.Fatalf("dry=%v: codes %v, want %v", dry, codes, want)
		}
		for i := 0; i < 5; i++ {
			if c := do("/h", "t1", -1).Code; c != 200 {
				t.Fatalf("exempt group: %d", c)
			}
			if c := do("/b", "vip", -1).Code; c != 200 {
				t.Fatalf("exempt identity: %d", c)
			}
		}
		// No token: the client IP's own quota.
		if c := do("/b", "", -1).Code; c != 200 {
			t.Fatalf("fallback IP: %d", c)
		}
		if err := m.Reset(context.Background(), httplimit.TokenIdentity("t1")); err != nil {
			t.Fatal(err)
		}
		if c := do("/b", "t1", -1).Code; c != 200 {
			t.Fatalf("dry=%v: after Reset: %d", dry, c)
		}
		if c := do("/b", "", -1).Code; c != 200 {
			t.Fatalf("dry=%v: fallback IP, 2nd: %d", dry, c)
		}
		if c := do("/b", "", -1).Code; c != 429 && !dry {
			t.Fatalf("fallback IP, 3rd: %d (Reset of t1 must not touch ip)", c)
		}
		if dry && calls != 3+2+10+1+1+2 {
			t.Errorf("dry run served %d", calls)
		}
		m.Close()
	}
}

// TestBlackBoxCostAboveCapacity: a fixed Group.Cost or Config.GlobalCost
// above its limit's capacity would refuse every request with 403 for
// ever; New reports it, naming the field, for every algorithm. A cost
// equal to the capacity is valid and admitted once.
func TestBlackBoxCostAboveCapacity(t *testing.T) {
	limits := map[string]hotlimit.Policy{
		"tb":  hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 3, Per: 7 * time.Second}, Burst: 5},
		"lb":  hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 3, Per: 7 * time.Second}, Capacity: 4},
		"fw":  hotlimit.FixedWindow{Limit: 5, Window: 7 * time.Second},
		"sw":  hotlimit.SlidingWindow{Limit: 5, Window: 7 * time.Second},
		"sl":  &hotlimit.SlidingLog{Limit: 5, Window: 7 * time.Second},
		"big": hotlimit.FixedWindow{Limit: 100, Window: time.Second},
	}
	for _, name := range []string{"tb", "lb", "fw", "sw", "sl"} {
		for _, c := range []struct {
			cost, globalCost int64
			field            string // "" when valid
		}{
			{5, 0, ""}, {0, 5, ""}, {6, 0, "Cost"}, {0, 6, "GlobalCost"}, {1 << 62, 0, "Cost"}, {0, 1<<63 - 1, "GlobalCost"},
		} {
			group, global := name, "big"
			if c.globalCost != 0 {
				group, global = "big", name
			}
			cfg := httplimit.Config{
				Limits:       limits,
				Global:       global,
				GlobalCost:   c.globalCost,
				Groups:       []httplimit.Group{{Name: "g", Limit: group, Cost: c.cost}, {Name: "free", Patterns: []string{"/free"}, Exempt: true, Cost: 1 << 40}},
				DefaultGroup: "g",
				Key:          httplimit.IPKey(nil),
			}
			_, err := httplimit.New(cfg)
			if c.field == "" {
				if err != nil {
					t.Fatalf("%s %+v: %v", name, c, err)
				}
				s := newBB(t, cfg)
				if w := s.get(0); w.Code != http.StatusOK {
					t.Fatalf("%s %+v: a cost equal to the capacity: %d", name, c, w.Code)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), strconv.Quote(name)) {
				t.Fatalf("%s %+v: New error %v, want one naming %s and limit %q", name, c, err, c.field, name)
			}
		}
	}
}

// TestBlackBoxTokenHeaderName: a token header no request can carry is a
// configuration error: ByToken refuses it (rather than limiting every
// request by its IP), and TokenKey's and TokenKeyHMAC's every call fails
// with an error that is not ErrNoKey.
func TestBlackBoxTokenHeaderName(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header["X Token"] = []string{"abc"}
	r.Header[""] = []string{"abc"}
	for _, name := range []string{"", "X Token", "X-Token:", "Tök"} {
		if m, err := httplimit.ByToken(name, hotlimit.PerMinute(5)); err == nil || !strings.Contains(err.Error(), strconv.Quote(name)) {
			if m != nil {
				m.Close()
			}
			t.Errorf("ByToken(%q): %v, want an error naming the header", name, err)
		}
		for _, kf := range []admission.KeyFunc[*http.Request]{httplimit.TokenKey(name), httplimit.TokenKeyHMAC(name, []byte("k"))} {
			if _, err := kf(nil, r); err == nil || errors.Is(err, httplimit.ErrNoKey) {
				t.Errorf("TokenKey(%q): %v, want a configuration error", name, err)
			}
		}
	}
	for _, name := range []string{"X-Api-Key", "authorization", "x_key.v2"} {
		m, err := httplimit.ByToken(name, hotlimit.PerMinute(5))
		if err != nil {
			t.Fatalf("ByToken(%q): %v", name, err)
		}
		m.Close()
	}
}

// TestBlackBoxRemainingExact: at one instant, a client that trusts r
// sends exactly r more requests of the item's cost and every one passes,
// and the next one is refused, for every algorithm, with and without a
// global layer (r of the binding item, the smallest in cost units).
func TestBlackBoxRemainingExact(t *testing.T) {
	policies := map[string]hotlimit.Policy{
		"tb":  hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 3, Per: 7 * time.Second}, Burst: 9},
		"lb":  hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 3, Per: 7 * time.Second}, Capacity: 8},
		"fw":  hotlimit.FixedWindow{Limit: 9, Window: 7 * time.Second},
		"sw":  hotlimit.SlidingWindow{Limit: 9, Window: 7 * time.Second},
		"sl":  hotlimit.SlidingLog{Limit: 9, Window: 7 * time.Second},
		"glo": hotlimit.FixedWindow{Limit: 6, Window: 11 * time.Second},
	}
	for _, name := range []string{"tb", "lb", "fw", "sw", "sl"} {
		for _, global := range []string{"", "glo", name} {
			for _, step := range []time.Duration{0, 2 * time.Second, 5500 * time.Millisecond} {
				s := newBB(t, httplimit.Config{
					Limits:       policies,
					Global:       global,
					Groups:       []httplimit.Group{{Name: "g", Limit: name, CostFunc: headerCost}},
					DefaultGroup: "g",
					Key:          httplimit.IPKey(nil),
				})
				// Some history, then a look at r.
				for i := 0; i < 4; i++ {
					s.get(1)
					s.clock.Advance(step)
				}
				w := s.get(0)
				if w.Code != http.StatusOK {
					t.Fatalf("%s/%s: a free request: %d", name, global, w.Code)
				}
				minR := int64(1 << 62)
				for _, ps := range checkFields(t, w.Header()) {
					r, _ := ps.Get("r")
					minR = min(minR, r.Int)
				}
				for i := int64(0); i < minR; i++ {
					if w := s.get(1); w.Code != http.StatusOK {
						t.Fatalf("%s/%s/%v: r=%d, request %d refused: %q", name, global, step, minR, i, w.Header().Values("RateLimit"))
					}
				}
				w = s.get(1)
				if w.Code != http.StatusTooManyRequests {
					t.Fatalf("%s/%s/%v: r=%d, request %d: %d", name, global, step, minR, minR, w.Code)
				}
				// t is when the item's next unit comes back: waiting it
				// out, the item holds more than before.
				before := checkFields(t, w.Header())
				for item, ps := range before {
					tt, ok := ps.Get("t")
					if !ok {
						continue
					}
					r0, _ := ps.Get("r")
					s.clock.Advance(time.Duration(tt.Int) * time.Second)
					probe := s.get(0) // free in the group's limit, GlobalCost (1) in the global one
					spent := int64(0)
					if item != name && probe.Code == http.StatusOK {
						spent = 1
					}
					after := checkFields(t, probe.Header())
					if r1, _ := after[item].Get("r"); r1.Int+spent <= r0.Int {
						t.Fatalf("%s/%s/%v: item %q: r=%d, and still %d after t=%d s", name, global, step, item, r0.Int, r1.Int, tt.Int)
					}
					break // the clock has moved: the other items' t no longer apply
				}
			}
		}
	}
}

// TestBlackBoxFreeRequest: a price of 0 consumes nothing in the group's
// limit, and is admitted however empty it is; the global layer charges
// GlobalCost for it all the same, and refuses it once that is spent.
func TestBlackBoxFreeRequest(t *testing.T) {
	s := newBB(t, httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"grp": hotlimit.FixedWindow{Limit: 2, Window: time.Minute},
			"all": hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
		},
		Global:       "all",
		Groups:       []httplimit.Group{{Name: "g", Limit: "grp", CostFunc: headerCost}},
		DefaultGroup: "g",
		Key:          httplimit.IPKey(nil),
	})
	s.get(2) // the group's limit is empty; the global one holds 4
	for i := int64(3); i >= 0; i-- {
		w := s.get(0)
		items := checkFields(t, w.Header())
		g, _ := items["grp"].Get("r")
		a, _ := items["all"].Get("r")
		if w.Code != http.StatusOK || g.Int != 0 || a.Int != i {
			t.Fatalf("free request: %d, grp r=%d, all r=%d; want 200, 0, %d", w.Code, g.Int, a.Int, i)
		}
	}
	if w := s.get(0); w.Code != http.StatusTooManyRequests {
		t.Fatalf("free request, global layer spent: %d, want 429", w.Code)
	}
}
