package httplimit

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestReset: an operator's Reset of a client's identity gives back every
// layer it is limited by, the group's and the global one, and nobody
// else's; a backend that cannot reset says so.
func TestReset(t *testing.T) {
	hs := newHarness(t, Config{
		Limits: map[string]hotlimit.Policy{
			"l":   hotlimit.FixedWindow{Limit: 2, Window: time.Hour},
			"all": hotlimit.TokenBucket{Rate: hotlimit.PerHour(3), Burst: 3},
		},
		Groups:       []Group{{Name: "a", Patterns: []string{"/a"}, Limit: "l"}, {Name: "b", Patterns: []string{"/b"}, Limit: "l"}},
		DefaultGroup: "a",
		Global:       "all",
		Key:          TokenKey("Authorization"),
	})
	hs.do("/a", token)
	hs.do("/a", token)
	hs.do("/b", token) // the global layer is now spent too
	hs.do("/b", "other-client")
	if w := hs.do("/b", token); w.Code != http.StatusTooManyRequests {
		t.Fatalf("not drained: %d", w.Code)
	}
	if id := TokenIdentity(" " + token + " "); id != tokenIdentity(t, token) {
		t.Fatalf("TokenIdentity = %q, TokenKey's identity %q", id, tokenIdentity(t, token))
	}
	if err := hs.m.Reset(context.Background(), TokenIdentity(token)); err != nil {
		t.Fatal(err)
	}
	lim := hs.local(t)
	id := tokenIdentity(t, token)
	for _, c := range []struct{ limit, key string }{{"l", LayerKey(id, "a")}, {"l", LayerKey(id, "b")}, {"all", LayerKey(id, "")}} {
		if d := lim.Limiter(c.limit).AllowN(c.key, 0); d.Remaining != d.Limit {
			t.Errorf("%s %s: Remaining %d after Reset, want %d", c.limit, c.key, d.Remaining, d.Limit)
		}
	}
	if d := lim.Limiter("all").AllowN(LayerKey(tokenIdentity(t, "other-client"), ""), 0); d.Remaining != 2 {
		t.Errorf("another client's global layer: Remaining %d, want 2 (untouched)", d.Remaining)
	}
	if w := hs.do("/a", token); w.Code != http.StatusOK {
		t.Fatalf("after Reset: %d", w.Code)
	}

	plain := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 2, Window: time.Hour}},
		Groups:       []Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          TokenKey("Authorization"),
		Backend: func(l map[string]hotlimit.Policy) (Backend, error) {
			b, err := NewLocal(l)
			return plainBackend{l: b}, err
		},
	})
	if err := plain.m.Reset(context.Background(), id); !errors.Is(err, ErrResetUnsupported) {
		t.Errorf("Reset through a backend without it: %v, want ErrResetUnsupported", err)
	}
	if err := lim.Reset(context.Background(), "nope", "k"); !errors.Is(err, ErrUnknownLimit) {
		t.Errorf("Local.Reset of an unknown limit: %v", err)
	}
}

// TestDecideAndResetVia: Decide reaches each backend through the richest
// interface it has, marking states it cannot report as unknown, and
// ResetVia resets through a ResetBackend or says it cannot.
func TestDecideAndResetVia(t *testing.T) {
	limits := map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 3, Window: time.Hour}}
	mk := func() *Local {
		l, err := NewLocal(limits, hotlimit.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	layers := []Layer{{Limit: "l", Key: "k", Cost: 1}}
	for _, c := range []struct {
		name      string
		b         Backend
		idx       int
		remaining int64 // the state's; -1: unknown
		resets    bool
	}{
		{"Local", mk(), 0, 2, true},
		{"binding only", bindingOnly{mk()}, 0, -1, false},
		{"Allow only", plainBackend{mk()}, -1, -1, false},
	} {
		states := []LayerState{{Remaining: 99}}
		d, idx, err := Decide(context.Background(), c.b, layers, states)
		if err != nil || !d.Allowed || d.Remaining != 2 || idx != c.idx || states[0].Remaining != c.remaining {
			t.Errorf("%s: %+v %d %v, state %+v", c.name, d, idx, err, states[0])
		}
		err = ResetVia(context.Background(), c.b, "l", "k")
		if c.resets != (err == nil) || !c.resets && !errors.Is(err, ErrResetUnsupported) {
			t.Errorf("%s: ResetVia: %v", c.name, err)
		}
	}
}
