package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/hotlimitd/backend"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"github.com/hotlimit/hotlimit/hotlimitd/internal/bench"
	"github.com/hotlimit/hotlimit/promlimit"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// serveHotlimitd serves hotlimitd's Server on a free loopback port, with
// bench.Config's configuration and f's backend, as cmd/hotlimitd serves
// it: its gRPC codec (hotlimitd.ServerOption) and stream workers
// (-grpc-stream-workers), a hotlimitd/backend Store,
// promlimit's decision metrics; -replicas
// of them, each with its own Store and port, all on the same Redis state. Its Redis keys carry a
// prefix of their own, so no run sees another's state. On Redis, its
// settings are cmd/hotlimitd's defaults: each call may take 2 s
// (-redis-timeout), a breaker of redislimit's defaults, no denial cache
// unless -local-denials. Backend errors are logged to standard error.
func serveHotlimitd(ctx context.Context, f *flags) (addrs []string, stop func(), err error) {
	alg, _ := bench.ParseAlgorithm(f.alg)
	cfg, err := config.Parse("rlsbench.yaml", bench.Config(alg, f.limit, f.unit, f.desc, f.over > 0))
	if err != nil {
		return nil, nil, err
	}
	o := backend.Options{Kind: backend.Kind(f.backend)}
	if o.Kind != backend.Local {
		o.RedisAddrs = []string{f.redis}
		o.Prefix = fmt.Sprintf("rlsbench:%d:", time.Now().UnixNano())
		o.Timeout = f.redisTimeout
		// As cmd/hotlimitd: one breaker for every limit, at its
		// defaults (5 failures, 1s open), and -redis-local-denials.
		o.RedisOptions = []redislimit.Option{redislimit.WithBreaker(redislimit.NewBreaker(5, time.Second))}
		if f.localDenials > 0 {
			o.RedisOptions = append(o.RedisOptions, redislimit.WithLocalDenials(f.localDenials))
		}
	}
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	// Replicas share the Redis state: one Redis, one prefix, the same
	// limit names.
	for range f.replicas {
		store, err := backend.Open(ctx, o, cfg.Limits())
		if err != nil {
			return nil, nil, err
		}
		stops = append(stops, func() { store.Close() })
		// The decision metrics cmd/hotlimitd records (its /metrics is not
		// served here: nothing scrapes it during a run).
		bm := promlimit.NewBackendMetrics(promlimit.BackendOptions{})
		prometheus.NewRegistry().MustRegister(bm)
		s, err := hotlimitd.New(hotlimitd.Options{
			Config:    func() *config.Config { return cfg },
			Backend:   store,
			Observers: []admission.Observer{bm},
			Logger:    slog.New(slog.NewTextHandler(os.Stderr, nil)),
		})
		if err != nil {
			return nil, nil, err
		}
		gopts := []grpc.ServerOption{hotlimitd.ServerOption()}
		if f.streamWorkers > 0 {
			gopts = append(gopts, grpc.NumStreamWorkers(uint32(f.streamWorkers)))
		}
		g := grpc.NewServer(gopts...)
		s.Register(g)
		stops = append(stops, g.Stop)
		addr, err := listen(ctx, g)
		if err != nil {
			return nil, nil, err
		}
		addrs = append(addrs, addr)
	}
	return addrs, stop, nil
}
