package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// store is the backend the command runs: it decides, follows the
// configuration's limits across reloads, and closes.
type store interface {
	admission.StateBackend
	Update(limits map[string]hotlimit.Policy) error
	Close(ctx context.Context) error
}

// openStore opens the backend -backend names.
func openStore(_ context.Context, f *flags, limits map[string]hotlimit.Policy) (store, error) {
	switch f.backend {
	case "local":
		s := &localStore{}
		if err := s.Update(limits); err != nil {
			return nil, err
		}
		return s, nil
	case "redis", "lease":
		if strings.TrimSpace(f.redis) == "" {
			return nil, fmt.Errorf("-backend %s needs -redis", f.backend)
		}
		return nil, fmt.Errorf("-backend %s: not available yet", f.backend)
	}
	return nil, fmt.Errorf("-backend %q: want local, redis or lease", f.backend)
}

// localStore is an in-process backend rebuilt on each reload.
type localStore struct {
	cur atomic.Pointer[admission.Local]
}

func (s *localStore) Update(limits map[string]hotlimit.Policy) error {
	if len(limits) == 0 {
		limits = map[string]hotlimit.Policy{"": hotlimit.FixedWindow{Limit: 1, Window: 1}}
	}
	l, err := admission.NewLocal(limits)
	if err != nil {
		return err
	}
	if old := s.cur.Swap(l); old != nil {
		old.Close()
	}
	return nil
}

func (s *localStore) Allow(ctx context.Context, ls []admission.Layer) (hotlimit.Decision, error) {
	return s.cur.Load().Allow(ctx, ls)
}

func (s *localStore) AllowBinding(ctx context.Context, ls []admission.Layer) (hotlimit.Decision, int, error) {
	return s.cur.Load().AllowBinding(ctx, ls)
}

func (s *localStore) AllowStates(ctx context.Context, ls []admission.Layer, st []admission.LayerState) (hotlimit.Decision, int, error) {
	return s.cur.Load().AllowStates(ctx, ls, st)
}

func (s *localStore) Close(context.Context) error { return s.cur.Load().Close() }
