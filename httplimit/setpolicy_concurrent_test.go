package httplimit_test

import (
	"context"
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/hotlimit/hotlimit/internal/sfv"
)

// TestSetPolicyUnderTraffic flips a limit between FixedWindow 5/h and
// 20/2h while requests run, and checks that every response's RateLimit
// item and RateLimit-Policy item describe one of the two policies
// together: r ≤ q, w the window of that q, and t within w.
func TestSetPolicyUnderTraffic(t *testing.T) {
	clock := hotlimit.NewManualClock()
	clock.Set(1000 * time.Second)
	small := hotlimit.FixedWindow{Limit: 5, Window: time.Hour}
	big := hotlimit.FixedWindow{Limit: 20, Window: 2 * time.Hour}
	m, err := httplimit.New(httplimit.Config{
		Limits:       map[string]hotlimit.Policy{"l": small},
		Groups:       []httplimit.Group{{Name: "all", Limit: "l"}},
		DefaultGroup: "all",
		Key:          httplimit.IPKey(nil),
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)),
		Wait:         func(context.Context, time.Duration) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	classes := m.Backend().(*admission.Local).Classes()
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := small
			if i%2 == 0 {
				p = big
			}
			if err := classes.SetPolicy("l", p); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	windows := map[int64]int64{5: 3600, 20: 7200}
	var clients sync.WaitGroup
	for c := range 3 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for i := range 300 {
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = "192.0.2." + strconv.Itoa(1+(c*300+i)%50) + ":1"
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				pol, err1 := sfv.ParseList(w.Header().Get("RateLimit-Policy"))
				rl, err2 := sfv.ParseList(w.Header().Get("RateLimit"))
				if err1 != nil || err2 != nil || len(pol) != 1 || len(rl) != 1 {
					t.Errorf("fields %q, %q", w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"))
					return
				}
				q, _ := pol[0].Params.Get("q")
				wv, _ := pol[0].Params.Get("w")
				rv, _ := rl[0].Params.Get("r")
				tv, _ := rl[0].Params.Get("t")
				if windows[q.Int] != wv.Int || rv.Int > q.Int || tv.Int > wv.Int {
					t.Errorf("status %d: RateLimit-Policy %q with RateLimit %q", w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"))
					return
				}
			}
		}()
	}
	clients.Wait()
	close(stop)
	wg.Wait()
}
