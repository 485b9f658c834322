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
	admission.StateBackend
	Reload(limits map[string]hotlimit.Policy, publish func()) error
	Close(ctx context.Context) error
}

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
	case backend.Redis, backend.Lease:
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
