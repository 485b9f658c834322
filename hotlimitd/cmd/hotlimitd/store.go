package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd/backend"
)

// store is the backend the command runs (a *backend.Store): it decides,
// follows the configuration's limits across reloads, and closes.
type store interface {
	admission.Backend
	Reload(limits map[string]hotlimit.Policy, publish func()) error
}

// defaultMaxKeys bounds each limit of the in-process backend by default, so
// that a flood of distinct descriptor values (one key each) cannot grow the
// service's memory without bound.
const defaultMaxKeys = 1_000_000

// openStore opens the backend -backend names.
func openStore(ctx context.Context, f *flags, limits map[string]hotlimit.Policy) (store, error) {
	o := backend.Options{
		Kind:          backend.Kind(f.backend),
		Cluster:       f.redisCluster,
		HashTag:       f.redisHashTag,
		RedisPassword: os.Getenv("HOTLIMITD_REDIS_PASSWORD"),
	}
	switch o.Kind {
	case backend.Local:
		if f.redis != "" || f.redisCluster || f.redisHashTag != "" {
			return nil, fmt.Errorf("-backend local takes no -redis, -redis-cluster or -redis-hash-tag")
		}
		switch {
		case f.maxKeys < 0:
			return nil, fmt.Errorf("-max-keys %d: want 0 (no bound) or more", f.maxKeys)
		case f.maxKeys > 0:
			o.LocalOptions = []hotlimit.Option{hotlimit.WithMaxKeys(f.maxKeys)}
		}
	case backend.Redis, backend.Lease:
		if f.maxKeys != defaultMaxKeys {
			return nil, fmt.Errorf("-max-keys is for -backend local: Redis expires idle keys itself")
		}
		for _, a := range strings.Split(f.redis, ",") {
			if a = strings.TrimSpace(a); a != "" {
				o.RedisAddrs = append(o.RedisAddrs, a)
			}
		}
		if len(o.RedisAddrs) == 0 {
			return nil, fmt.Errorf("-backend %s needs -redis host:port", f.backend)
		}
	default:
		return nil, fmt.Errorf("-backend %q: want local, redis or lease", f.backend)
	}
	s, err := backend.Open(ctx, o, limits)
	if err != nil {
		return nil, fmt.Errorf("-backend %s: %w", f.backend, err)
	}
	return s, nil
}
