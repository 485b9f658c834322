package httplimit_test

import (
	"context"
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/hotlimit/hotlimit/internal/layeroracle"
	"github.com/hotlimit/hotlimit/internal/sfv"
)

// TestConcurrentLayersFields sends requests from several goroutines at a
// frozen instant through three layers of every algorithm and checks that
// the admitted responses' r values are bounded by the admissions before
// them, that each layer ends with exactly the admitted requests' units
// spent, and that no 429 has a t on an item it exceeded later than its
// Retry-After.
func TestConcurrentLayersFields(t *testing.T) {
	names := layeroracle.Algorithms
	for i, ga := range names {
		t.Run(ga, func(t *testing.T) {
			clock := hotlimit.NewManualClock()
			clock.Set(1000*time.Second + 250*time.Millisecond)
			lims := map[string]hotlimit.Policy{"grp": layeroracle.Policy(ga, 0), "glob": layeroracle.Policy(names[(i+1)%5], 0), "per-ip": layeroracle.Policy(names[(i+2)%5], 0)}
			m, err := httplimit.New(httplimit.Config{
				Limits:       lims,
				Groups:       []httplimit.Group{{Name: "api", Limit: "grp"}},
				DefaultGroup: "api",
				Key:          httplimit.TokenKey("Authorization"),
				Global:       "glob",
				Identities:   []httplimit.IdentityLimit{{Limit: "per-ip", Key: httplimit.IPKey(nil)}},
				Backend:      admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)),
				Wait:         func(context.Context, time.Duration) error { return nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			var mu sync.Mutex
			rs := map[string][]int64{}
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						r := httptest.NewRequest("GET", "/", nil)
						r.RemoteAddr = "192.0.2.7:1"
						r.Header.Set("Authorization", "Bearer t")
						w := httptest.NewRecorder()
						h.ServeHTTP(w, r)
						rl, err := sfv.ParseList(w.Header().Get("RateLimit"))
						if err != nil || len(rl) != 3 {
							t.Errorf("RateLimit %q: %v", w.Header().Get("RateLimit"), err)
							return
						}
						mu.Lock()
						switch w.Code {
						case 200:
							for _, it := range rl {
								v, _ := it.Params.Get("r")
								rs[it.Value.Str] = append(rs[it.Value.Str], v.Int)
							}
						case 429:
							for _, it := range rl {
								if v, _ := it.Params.Get("r"); v.Int < 1 {
									if tv, hasT := it.Params.Get("t"); hasT {
										if ra, _ := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64); ra < tv.Int {
											t.Errorf("Retry-After %d earlier than t=%d of an exceeded item: %q", ra, tv.Int, w.Header().Get("RateLimit"))
										}
									}
								}
							}
							// An exceeded sliding layer's t may be missing: another
							// request's give-back can change its state before t is
							// computed (see the package documentation).
						default:
							t.Errorf("status %d", w.Code)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			// Each admitted response's r is what its layer had left at its
			// decision, when at least as many admissions as came before it
			// were counted (and maybe other requests' units, taken for a
			// moment before a later layer refused them): the k-th largest r
			// is at most capacity−1−k. Once all are done, each layer holds
			// exactly the admitted requests' units.
			local := m.Backend().(*admission.Local)
			keys := map[string]string{
				"grp":    m.LayerKey(httplimit.TokenIdentity("t"), "api"),
				"glob":   m.LayerKey(httplimit.TokenIdentity("t"), ""),
				"per-ip": m.LayerKey("ip:192.0.2.7", ""),
			}
			for name, key := range keys {
				got := rs[name]
				sort.Slice(got, func(a, b int) bool { return got[a] > got[b] })
				pi, _ := hotlimit.Describe(lims[name])
				for k, r := range got {
					if r > pi.Limit-1-int64(k) {
						t.Fatalf("%s: admitted responses' r %v: more than capacity %d minus the admissions before", name, got, pi.Limit)
					}
				}
				if left := local.Classes().Class(name).Check(key, 0).Remaining; left != pi.Limit-int64(len(got)) {
					t.Fatalf("%s: %d left after %d admissions of capacity %d (r %v)", name, left, len(got), pi.Limit, got)
				}
			}
		})
	}
}
