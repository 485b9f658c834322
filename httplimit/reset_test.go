package httplimit

import (
	"context"
	"errors"
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestReset: an operator's Reset of a client's identity gives back every
// layer it is limited by, the group's and the global one, and nobody
// else's; a backend's failure to reset is returned, after every layer
// was tried.
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
	for _, c := range []struct{ limit, key string }{{"l", hs.m.LayerKey(id, "a")}, {"l", hs.m.LayerKey(id, "b")}, {"all", hs.m.LayerKey(id, "")}} {
		if d := lim.Classes().Class(c.limit).AllowN(c.key, 0); d.Remaining != d.Limit {
			t.Errorf("%s %s: Remaining %d after Reset, want %d", c.limit, c.key, d.Remaining, d.Limit)
		}
	}
	if d := lim.Classes().Class("all").AllowN(hs.m.LayerKey(tokenIdentity(t, "other-client"), ""), 0); d.Remaining != 2 {
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
		Global:       "l",
		Backend: func(l map[string]hotlimit.Policy) (admission.Backend, error) {
			b, err := newLocal(l)
			return &failingReset{Local: b}, err
		},
	})
	fr := plain.m.pipe.Backend().(*failingReset)
	if err := plain.m.Reset(context.Background(), id); !errors.Is(err, errResetFailed) || fr.calls != 2 {
		t.Errorf("Reset through a backend that fails: %v after %d calls, want errResetFailed after 2 (every layer tried)", err, fr.calls)
	}
	if err := lim.Reset(context.Background(), "nope", "k"); !errors.Is(err, admission.ErrUnknownLimit) {
		t.Errorf("admission.Local.Reset of an unknown limit: %v", err)
	}
}

var errResetFailed = errors.New("reset failed")

// failingReset is admission.Local whose Reset fails, counting its calls.
type failingReset struct {
	*admission.Local
	calls int
}

func (b *failingReset) Reset(context.Context, string, string) error {
	b.calls++
	return errResetFailed
}
