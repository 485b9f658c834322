package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestRedisPause: with the default -redis-timeout and breaker, a Redis
// that stops for 0.3s (kill -STOP, then -CONT) under concurrent callers
// fails no call once it answers again. 32 callers without a deadline are
// in flight through the whole pause and are all admitted; 8 others with
// Envoy's default timeout (20ms) give up during it, over and over, which
// must not open the breaker (a slow Redis is not a dead one); then 32
// callers × 10 calls after the pause all succeed. Redis's count of the
// limit (user, 10000 an hour) holds every admitted request, and at most
// the impatient ones more (a call its caller gave up on may have run).
// It needs a redis-server of its own (hotlimitd/test.sh provides the
// binary), since it stops it.
func TestRedisPause(t *testing.T) {
	srv := redistest.StartServer(t, 0)
	client := redistest.Client(t, srv.Addr())
	ctx := context.Background()
	info, err := client.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid <= 0 {
		t.Fatalf("no process_id in INFO server: %q", info)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume) // before the server is killed (cleanups run last first)
	path := filepath.Join(t.TempDir(), "limits.yaml")
	yaml := "domain: pause\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 10000\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	// Calls without a deadline (the patient callers') wait at a gate in
	// front of the backend until all of them are there, so that all are
	// in flight when Redis stops.
	const callers, impatientCallers = 32, 8
	g := &gate{arrived: make(chan struct{}, callers), open: make(chan struct{})}
	h := &hooks{backend: func(b admission.Backend) admission.Backend {
		return &gated{Backend: b, g: g}
	}}
	r := startCmd(t, h, "-config", path, "-backend", "redis", "-redis", srv.Addr())
	req := &rlsv3.RateLimitRequest{Domain: "pause", Descriptors: []*rlv3.RateLimitDescriptor{
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "user", Value: "ann"}}}}}
	var admitted atomic.Int64
	call := func(ctx context.Context) error {
		resp, err := r.rls.ShouldRateLimit(ctx, req)
		if err != nil {
			return err
		}
		if resp.OverallCode != rlsv3.RateLimitResponse_OK {
			return fmt.Errorf("refused: %v", resp)
		}
		admitted.Add(1)
		return nil
	}
	warm, cancel := context.WithTimeout(ctx, time.Minute)
	err = call(warm) // the connection is up, the limiter warm (a deadline: not gated)
	cancel()
	if err != nil {
		t.Fatal(err)
	}

	var patient, impatient sync.WaitGroup
	patientErrs := make(chan error, callers)
	for range callers {
		patient.Go(func() { patientErrs <- call(ctx) })
	}
	for range callers {
		<-g.arrived
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	close(g.open) // the patient calls go to the stopped Redis
	var stop atomic.Bool
	var gaveUp atomic.Int64
	for range impatientCallers {
		impatient.Go(func() {
			for !stop.Load() {
				c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
				if call(c) != nil {
					gaveUp.Add(1)
				}
				cancel()
			}
		})
	}
	// As many impatient calls gave up as open the old breaker, and the
	// pause has lasted 0.3s (the pause itself, not a wait for an outcome).
	redistest.WaitFor(t, "impatient calls giving up", func() bool { return gaveUp.Load() >= 5 })
	time.Sleep(300*time.Millisecond - time.Since(stopped))
	resume()
	paused := time.Since(stopped)
	stop.Store(true)
	impatient.Wait()
	patient.Wait()
	t.Logf("Redis stopped for %v; the calls in flight through it were answered %v after it stopped", paused, time.Since(stopped))
	close(patientErrs)
	for err := range patientErrs {
		if err != nil {
			t.Errorf("a call in flight through the pause failed: %v", err)
		}
	}
	var after sync.WaitGroup
	var failed atomic.Int64
	for range callers {
		after.Go(func() {
			for range 10 {
				if err := call(ctx); err != nil {
					if failed.Add(1) == 1 {
						t.Errorf("a call after the pause failed: %v", err)
					}
				}
			}
		})
	}
	after.Wait()
	if n := failed.Load(); n > 0 {
		t.Logf("the command's log:\n%s", r.logs)
		t.Fatalf("%d of %d calls after the pause failed, want 0", n, callers*10)
	}
	resp, err := r.rls.ShouldRateLimit(ctx, req)
	if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("last call: %v, %v", resp, err)
	}
	admitted.Add(1)
	used := 10000 - int64(resp.Statuses[0].LimitRemaining)
	if used < admitted.Load() || used > admitted.Load()+gaveUp.Load() {
		t.Fatalf("Redis counted %d, want the %d admitted and at most the %d given up on more", used, admitted.Load(), gaveUp.Load())
	}
	t.Logf("%d impatient calls gave up during the pause; %d admitted; Redis counted %d", gaveUp.Load(), admitted.Load(), used)
}

// gate holds the calls without a deadline until it opens.
type gate struct {
	arrived chan struct{} // one per call held
	open    chan struct{} // closed: every call goes on
}

// gated is a backend whose calls without a deadline wait at its gate.
type gated struct {
	admission.Backend
	g *gate
}

func (b *gated) AllowStates(ctx context.Context, layers []admission.Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	if _, ok := ctx.Deadline(); !ok {
		select {
		case b.g.arrived <- struct{}{}:
			<-b.g.open
		default: // the gate is full: held calls are all there
		}
	}
	return b.Backend.AllowStates(ctx, layers, states)
}
