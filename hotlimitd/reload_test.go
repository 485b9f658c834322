package hotlimitd_test

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/hotlimitd/backend"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestConcurrentReloads: while the configuration is swapped back and
// forth (through backend.Store.Reload, as cmd/hotlimitd does), every
// request is decided under one configuration: its two descriptors'
// limits come from the same one. Run under -race.
func TestConcurrentReloads(t *testing.T) {
	parse := func(rpu string) *config.Config {
		c, err := config.Parse("r.yaml", []byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: hour\n      requests_per_unit: "+rpu+
			"\n  - key: b\n    rate_limit:\n      unit: hour\n      requests_per_unit: "+rpu+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cfgs := [2]*config.Config{parse("1000000"), parse("2000000")}
	var cur atomic.Pointer[config.Config]
	cur.Store(cfgs[0])
	st, err := backend.Open(context.Background(), backend.Options{LocalOptions: []hotlimit.Option{hotlimit.WithSweepInterval(0)}}, cfgs[0].Limits())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := hotlimitd.New(hotlimitd.Options{Config: cur.Load, Backend: st})
	if err != nil {
		t.Fatal(err)
	}
	const reloads, workers, requests = 100, 2, 400
	var wg sync.WaitGroup
	var oks, unavailable atomic.Int64
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 1; i <= reloads; i++ {
			next := cfgs[i%2]
			if err := st.Reload(next.Limits(), func() { cur.Store(next) }); err != nil {
				t.Error(err)
				return
			}
		}
		close(stop)
	})
	for range workers {
		wg.Go(func() {
			req := request("d", desc("a", "x"), desc("b", "y"))
			for range requests {
				resp, err := srv.ShouldRateLimit(context.Background(), req)
				if status.Code(err) == codes.Unavailable {
					unavailable.Add(1) // only if maxRetries reloads landed within this request
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				a, b := resp.Statuses[0].CurrentLimit, resp.Statuses[1].CurrentLimit
				if resp.OverallCode != rlsv3.RateLimitResponse_OK || a.GetRequestsPerUnit() != b.GetRequestsPerUnit() {
					t.Errorf("a request decided under two configurations: %v", resp)
					return
				}
				oks.Add(1)
			}
		})
	}
	wg.Wait()
	<-stop
	if oks.Load() == 0 {
		t.Fatal("no request was answered")
	}
	t.Logf("%d answered, %d unavailable, over %d reloads", oks.Load(), unavailable.Load(), reloads)
}

// TestConfigReadOnce: a request reads the configuration once, whatever
// its descriptors, so a reload can never split it: a Config that
// alternates two configurations at every call still gets every request
// answered under one (both statuses' limits from the same).
func TestConfigReadOnce(t *testing.T) {
	f := newFixture(t, testYAML, hotlimitd.Options{})
	other, err := config.Parse("other.yaml", []byte("domain: test\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 9\n"))
	if err != nil {
		t.Fatal(err)
	}
	limits := f.cfg.Limits()
	maps.Copy(limits, other.Limits())
	both, err := admission.LocalBackend(hotlimit.WithSweepInterval(0))(limits) // serves either
	if err != nil {
		t.Fatal(err)
	}
	defer both.Close()
	calls := 0
	srv, err := hotlimitd.New(hotlimitd.Options{Backend: both, Config: func() *config.Config {
		calls++
		if calls%2 == 0 {
			return other
		}
		return f.cfg
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		resp := ask(t, srv, request("test", desc("user", "ann"), desc("user", "bob"), desc("path", "/a")))
		if calls != i+1 {
			t.Fatalf("request %d: Config called %d times in all, want %d", i, calls, i+1)
		}
		if a, b := resp.Statuses[0].CurrentLimit, resp.Statuses[1].CurrentLimit; a.GetRequestsPerUnit() != b.GetRequestsPerUnit() {
			t.Fatalf("request %d decided under two configurations: %v", i, resp)
		}
	}
}
