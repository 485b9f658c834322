package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
)

// TestConcurrentIdentitiesExact: goroutines sharing one Middleware (one
// Pipeline, whose pooled Results hand a Local views of their keys) send
// requests of many identities at a frozen instant: tokens of one length
// past the 15-byte inline slot, and, with no token, IPv4 and IPv6
// clients (FallbackToIP; each IPv6 one in a /64 of its own), in two
// groups. Each identity is admitted exactly its global burst, in neither
// group more than the group's limit: no request is counted under
// another's key.
func TestConcurrentIdentitiesExact(t *testing.T) {
	clock := hotlimit.NewManualClock()
	clock.Set(500 * time.Second)
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"a":    hotlimit.FixedWindow{Limit: 3, Window: time.Minute},
			"b":    hotlimit.SlidingLog{Limit: 4, Window: time.Minute},
			"glob": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(1), Burst: 6},
		},
		Groups: []httplimit.Group{
			{Name: "a", Patterns: []string{"/a"}, Limit: "a"},
			{Name: "b", Patterns: []string{"/b"}, Limit: "b"},
		},
		DefaultGroup: "a",
		Key:          httplimit.TokenKey("Authorization"),
		FallbackToIP: true,
		Global:       "glob",
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	type who struct{ token, addr string }
	var ids []who
	for i := range 8 {
		ids = append(ids, who{token: fmt.Sprintf("%02d%s%02d", i, strings.Repeat("x", 30), i), addr: "203.0.113.9:1"})
	}
	for _, a := range []string{"192.0.2.1:1", "192.0.2.2:1", "192.0.3.1:1", "[2001:db8:0:1::1]:1", "[2001:db8:0:2::1]:1"} {
		ids = append(ids, who{addr: a})
	}
	const goroutines, rounds = 8, 3
	var mu sync.Mutex
	admitted := map[string]int{} // by identity and group
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range rounds * len(ids) * 2 {
				id := ids[(n+w)%len(ids)]
				path := [2]string{"/a", "/b"}[(n/len(ids)+w)%2]
				r := httptest.NewRequest("GET", path, nil)
				r.RemoteAddr = id.addr
				if id.token != "" {
					r.Header.Set("Authorization", "Bearer "+id.token)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				mu.Lock()
				if rec.Code == http.StatusOK {
					admitted[id.token+id.addr+path]++
					admitted[id.token+id.addr]++
				} else if rec.Code != http.StatusTooManyRequests {
					t.Errorf("%v %s: status %d", id, path, rec.Code)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Each identity sends goroutines×rounds requests to each group: more
	// than either group's limit, and than the global burst (6 < 3+4).
	for _, id := range ids {
		a, b, all := admitted[id.token+id.addr+"/a"], admitted[id.token+id.addr+"/b"], admitted[id.token+id.addr]
		if all != 6 || a > 3 || b > 4 {
			t.Errorf("%v: admitted %d in a, %d in b, %d in all; want at most 3 and 4, 6 in all", id, a, b, all)
		}
	}
}
