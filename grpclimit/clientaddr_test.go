package grpclimit_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/grpclimit"
	"github.com/hotlimit/hotlimit/internal/layeroracle"
)

// TestNilKeyIsPeerKey: a nil Config.Key and IdentityLimit.Key limit by
// the peer's address exactly as PeerKey(Config.ClientIP) does, though the
// pipeline takes the address itself (admission.Config.ClientAddr): for
// IPv4 and IPv6 peers, behind trusted proxies or not, and a peer with no
// IP, the same outcomes, the same keys in a shared store byte for byte,
// and in a Local the keys LayerKey gives PeerKey's identity.
func TestNilKeyIsPeerKey(t *testing.T) {
	trusting, err := admission.NewClientIP([]string{"10.0.0.0/8"}, "", 48, 24)
	if err != nil {
		t.Fatal(err)
	}
	peers := []struct {
		addr net.Addr
		xff  string
	}{
		{net.TCPAddrFromAddrPort(netip.MustParseAddrPort("192.0.2.1:4242")), ""},
		{net.TCPAddrFromAddrPort(netip.MustParseAddrPort("255.255.255.255:1")), ""},
		{net.TCPAddrFromAddrPort(netip.MustParseAddrPort("10.1.2.3:80")), "198.51.100.7"},
		{net.TCPAddrFromAddrPort(netip.MustParseAddrPort("[2001:db8:1:2::1]:443")), ""},
		{net.TCPAddrFromAddrPort(netip.MustParseAddrPort("[::ffff:192.0.2.1]:80")), ""},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, ""},
	}
	for _, c := range []*admission.ClientIP{nil, trusting} {
		for _, p := range peers {
			ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: p.addr})
			if p.xff != "" {
				ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("x-forwarded-for", p.xff))
			}
			id, idErr := grpclimit.PeerKey(c)(nil, ctx)
			for _, shared := range []bool{false, true} {
				var got [2][]string
				for i, explicit := range []bool{false, true} {
					kept := &layeroracle.Kept{}
					cfg := grpclimit.Config{
						Limits: map[string]hotlimit.Policy{
							"l":  hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
							"id": hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
						},
						Groups:       []grpclimit.Group{{Name: "g", Methods: []string{mCheck}, Limit: "l"}},
						DefaultGroup: "g",
						Global:       "l",
						Identities:   []grpclimit.IdentityLimit{{Limit: "id"}},
						ClientIP:     c,
					}
					if explicit {
						cfg.Key, cfg.Identities[0].Key = grpclimit.PeerKey(c), grpclimit.PeerKey(c)
					}
					if shared {
						cfg.Backend = func(map[string]hotlimit.Policy) (admission.Backend, error) { return kept, nil }
					}
					ic := newIC(t, hotlimit.NewManualClock(), cfg)
					err := ic.Limit(ctx)
					if (err != nil) != (idErr != nil) {
						t.Fatalf("%v %v explicit %v: %v, PeerKey's error %v", c != nil, p.addr, explicit, err, idErr)
					}
					got[i] = kept.Keys
					if idErr != nil || shared {
						continue
					}
					for limit, k := range map[string]string{"l": ic.LayerKey(string(id), "g"), "id": ic.LayerKey(string(id), "")} {
						if r := remaining(t, ic, limit, k); r != 4 {
							t.Errorf("%v %v explicit %v: %s key %q has %d left, want 4", c != nil, p.addr, explicit, limit, k, r)
						}
					}
				}
				if len(got[0]) != len(got[1]) {
					t.Fatalf("%v %v: nil Key's keys %q, PeerKey's %q", c != nil, p.addr, got[0], got[1])
				}
				for i := range got[0] {
					if got[0][i] != got[1][i] {
						t.Errorf("%v %v: nil Key's shared key %q, PeerKey's %q", c != nil, p.addr, got[0][i], got[1][i])
					}
				}
			}
		}
	}
}
