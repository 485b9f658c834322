package httplimit

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/layeroracle"
)

// TestNilKeyIsIPKey: a nil Config.Key and IdentityLimit.Key limit by the
// client IP exactly as IPKey(Config.ClientIP) does, though the pipeline
// takes the address itself (admission.Config.ClientAddr): for IPv4 and
// IPv6 peers, grouped or not, behind trusted proxies or not, with
// forwarding headers, and peers with no IP, the same outcomes, the same
// keys in a shared store byte for byte, and in a Local the keys
// LayerKey gives IPKey's identity.
func TestNilKeyIsIPKey(t *testing.T) {
	trusting, err := admission.NewClientIP([]string{"10.0.0.0/8"}, "", 48, 24)
	if err != nil {
		t.Fatal(err)
	}
	peers := []struct{ remote, xff string }{
		{"192.0.2.10:5555", ""}, {"255.255.255.255:1", ""}, {"0.0.0.0:65535", ""}, {"10.1.2.3:80", "198.51.100.7"},
		{"10.1.2.3:80", "10.9.9.9, 203.0.113.200"}, {"[2001:db8:1:2::1]:443", ""}, {"[::ffff:192.0.2.10]:80", ""},
		{"192.0.2.10", ""}, {"@", ""}, {"192.0.2.010:80", ""},
	}
	for _, c := range []*admission.ClientIP{nil, trusting} {
		for _, peer := range peers {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = peer.remote
			if peer.xff != "" {
				r.Header.Set("X-Forwarded-For", peer.xff)
			}
			id, idErr := IPKey(c)(nil, r)
			for _, shared := range []bool{false, true} {
				outcomes := map[bool]admission.Outcome{}
				keys := map[bool][]string{}
				for _, explicit := range []bool{false, true} {
					kept := &layeroracle.Kept{}
					var ev admission.Event
					cfg := Config{
						Limits: map[string]hotlimit.Policy{
							"l":  hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
							"id": hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
						},
						Groups:       []Group{{Name: "g", Limit: "l"}},
						DefaultGroup: "g",
						Global:       "l",
						Identities:   []IdentityLimit{{Limit: "id"}},
						ClientIP:     c,
						Hook:         func(e admission.Event) { ev = e },
					}
					if explicit {
						cfg.Key, cfg.Identities[0].Key = IPKey(c), IPKey(c)
					}
					if shared {
						cfg.Backend = func(map[string]hotlimit.Policy) (admission.Backend, error) { return kept, nil }
					}
					hs := newHarness(t, cfg)
					w := httptest.NewRecorder()
					hs.h.ServeHTTP(w, r)
					outcomes[explicit], keys[explicit] = ev.Outcome, kept.Keys
					if idErr != nil {
						if ev.Outcome != admission.OutcomeKeyDenied || ev.Err != idErr {
							t.Errorf("%v %+v explicit %v: %v %v, want key denied with %v", c != nil, peer, explicit, ev.Outcome, ev.Err, idErr)
						}
						continue
					}
					if !shared {
						local := hs.m.Backend().(*admission.Local)
						for limit, k := range map[string]string{"l": hs.m.LayerKey(string(id), "g"), "id": hs.m.LayerKey(string(id), "")} {
							if got := local.Classes().Class(limit).Check(k, 0).Remaining; got != 4 {
								t.Errorf("%v %+v explicit %v: %s key %q has %d left, want 4", c != nil, peer, explicit, limit, k, got)
							}
						}
						if n := local.Classes().Class("l").Len(); n != 2 {
							t.Errorf("%v %+v explicit %v: limit l holds %d keys, want 2", c != nil, peer, explicit, n)
						}
					}
				}
				if outcomes[false] != outcomes[true] || len(keys[false]) != len(keys[true]) {
					t.Fatalf("%v %+v shared %v: nil Key %v %q, IPKey %v %q", c != nil, peer, shared, outcomes[false], keys[false], outcomes[true], keys[true])
				}
				for i := range keys[false] {
					if keys[false][i] != keys[true][i] {
						t.Errorf("%v %+v: nil Key's shared key %q, IPKey's %q", c != nil, peer, keys[false][i], keys[true][i])
					}
				}
			}
		}
	}
}
