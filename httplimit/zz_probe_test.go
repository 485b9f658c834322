package httplimit_test

import (
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
)

func TestZZProbe(t *testing.T) {
	for _, global := range []string{"sw", ""} {
		s := newBB(t, httplimit.Config{
			Limits:       map[string]hotlimit.Policy{"sw": hotlimit.SlidingWindow{Limit: 9, Window: 7 * time.Second}},
			Global:       global,
			Groups:       []httplimit.Group{{Name: "g", Limit: "sw", CostFunc: headerCost}},
			DefaultGroup: "g",
			Key:          httplimit.IPKey(nil),
		})
		for i := 0; i < 4; i++ {
			s.get(1)
			s.clock.Advance(2 * time.Second)
		}
		for i := 0; i < 8; i++ {
			w := s.get(1)
			t.Logf("now=%v %d %q", s.clock.Now(), w.Code, w.Header().Values("RateLimit"))
		}
		for i := 0; i < 8; i++ {
			s.clock.Advance(time.Second)
			w := s.get(0)
			t.Logf("now=%v %d %q", s.clock.Now(), w.Code, w.Header().Values("RateLimit"))
		}
	}
}
