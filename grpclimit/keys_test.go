package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/grpclimit"
	"github.com/hotlimit/hotlimit/httplimit"
)

// The client IP of a real call over loopback follows httplimit's rules:
// a client's own forwarding metadata is ignored unless its peer is a
// trusted proxy, and behind one the walk stops at the first untrusted
// hop. Each case checks the key the call was charged to and that the
// decoy key (the address the client wanted to be) was not.
func TestPeerKeyTrustedProxies(t *testing.T) {
	mustCIP := func(trusted []string, h string) *admission.ClientIP {
		c, err := admission.NewClientIP(trusted, h, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	loop := []string{"127.0.0.0/8"}
	cases := []struct {
		name    string
		network string
		cip     *admission.ClientIP
		md      []string // key, value pairs sent by the client
		want    string   // identity charged
		decoy   string   // identity that must not be charged
	}{
		{"no trusted proxies: XFF ignored", "tcp4", nil,
			[]string{"x-forwarded-for", "203.0.113.9"}, "ip:127.0.0.1", "ip:203.0.113.9"},
		{"untrusted peer: XFF ignored", "tcp4", mustCIP([]string{"10.0.0.0/8"}, "X-Forwarded-For"),
			[]string{"x-forwarded-for", "203.0.113.9"}, "ip:127.0.0.1", "ip:203.0.113.9"},
		{"untrusted peer: Forwarded ignored", "tcp4", mustCIP([]string{"10.0.0.0/8"}, "Forwarded"),
			[]string{"forwarded", "for=203.0.113.9"}, "ip:127.0.0.1", "ip:203.0.113.9"},
		{"trusted peer: XFF hop", "tcp4", mustCIP(loop, "X-Forwarded-For"),
			[]string{"x-forwarded-for", "203.0.113.9"}, "ip:203.0.113.9", "ip:127.0.0.1"},
		{"trusted peer: spoofed left hop ignored", "tcp4", mustCIP(loop, "X-Forwarded-For"),
			[]string{"x-forwarded-for", "198.51.100.1, 203.0.113.9"}, "ip:203.0.113.9", "ip:198.51.100.1"},
		{"walk past trusted hops", "tcp4", mustCIP([]string{"127.0.0.0/8", "10.0.0.0/8"}, "X-Forwarded-For"),
			[]string{"x-forwarded-for", "203.0.113.9, 10.1.2.3"}, "ip:203.0.113.9", "ip:10.1.2.3"},
		{"entries walked last one first", "tcp4", mustCIP(loop, "X-Forwarded-For"),
			[]string{"x-forwarded-for", "198.51.100.1", "x-forwarded-for", "203.0.113.9"}, "ip:203.0.113.9", "ip:198.51.100.1"},
		{"garbage hop: the proxy is the client", "tcp4", mustCIP(loop, "X-Forwarded-For"),
			[]string{"x-forwarded-for", "198.51.100.1, garbage"}, "ip:127.0.0.1", "ip:198.51.100.1"},
		{"Forwarded mode reads forwarded, not XFF", "tcp4", mustCIP(loop, "Forwarded"),
			[]string{"forwarded", "for=203.0.113.10", "x-forwarded-for", "198.51.100.1"}, "ip:203.0.113.10", "ip:198.51.100.1"},
		{"IPv6 client grouped by /64", "tcp4", mustCIP(loop, "X-Forwarded-For"),
			[]string{"x-forwarded-for", "2001:db8:1:2:3:4:5:6"}, "ip:2001:db8:1:2::/64", "ip:127.0.0.1"},
		{"IPv6 peer, XFF ignored", "tcp6", nil,
			[]string{"x-forwarded-for", "203.0.113.9"}, "ip:::/64", "ip:203.0.113.9"},
	}
	for _, tc := range cases {
		for _, once := range []bool{false, true} {
			name := tc.name
			if once {
				name += ", Config.ClientIP alone"
			}
			t.Run(name, func(t *testing.T) {
				if tc.network == "tcp6" {
					if l, err := net.Listen("tcp6", "[::1]:0"); err != nil {
						t.Skipf("no IPv6 loopback: %v", err)
					} else {
						l.Close()
					}
				}
				cfg := grpclimit.Config{
					Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 10, Window: time.Minute}},
					Groups:       []grpclimit.Group{{Name: "g", Limit: "l"}},
					DefaultGroup: "g",
					Key:          grpclimit.PeerKey(tc.cip),
				}
				if once { // a nil Key is PeerKey(Config.ClientIP): the ClientIP given once
					cfg.Key, cfg.ClientIP = nil, tc.cip
				}
				ic := newIC(t, hotlimit.NewManualClock(), cfg)
				c := serve(t, tc.network, grpcOpts(ic)...)
				if _, err := call(metadata.AppendToOutgoingContext(testCtx(t), tc.md...), c); err != nil {
					t.Fatal(err)
				}
				if r := remaining(t, ic, "l", ic.LayerKey(tc.want, "g")); r != 9 {
					t.Errorf("%s: Remaining %d, want 9 (charged once)", tc.want, r)
				}
				if r := remaining(t, ic, "l", ic.LayerKey(tc.decoy, "g")); r != 10 {
					t.Errorf("decoy %s was charged: Remaining %d", tc.decoy, r)
				}
			})
		}
	}
}

// New normalises a hand-built Config.ClientIP as httplimit.New does: a
// trusted proxy written IPv4-mapped (::ffff:127.0.0.0/104, which is
// 127.0.0.0/8) trusts the loopback peer, so the call is charged to the
// forwarded client, not to the proxy.
func TestNewNormalisesClientIP(t *testing.T) {
	cfg := grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 10, Window: time.Minute}},
		Groups:       []grpclimit.Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		ClientIP:     &admission.ClientIP{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("::ffff:127.0.0.0/104")}},
	}
	ic := newIC(t, hotlimit.NewManualClock(), cfg)
	c := serve(t, "tcp4", grpcOpts(ic)...)
	if _, err := call(metadata.AppendToOutgoingContext(testCtx(t), "x-forwarded-for", "198.51.100.7"), c); err != nil {
		t.Fatal(err)
	}
	if r := remaining(t, ic, "l", ic.LayerKey("ip:198.51.100.7", "g")); r != 9 {
		t.Errorf("forwarded client: Remaining %d, want 9 (charged once)", r)
	}
	if r := remaining(t, ic, "l", ic.LayerKey("ip:127.0.0.1", "g")); r != 10 {
		t.Errorf("the trusted proxy was charged: Remaining %d", r)
	}
}

// The HTTP and the gRPC paths find the same client: for one peer and
// one set of forwarding lines (as an X-Forwarded-For or a Forwarded
// header, and the same lines as the metadata entry of that name),
// grpclimit.ClientPrefix equals
// httplimit.ClientPrefix and PeerKey writes IPKey's identity, under
// every kind of ClientIP: none, trusting the peer or not, in either
// header mode, grouping or not. A peer that is not an IP is
// ErrNoClientIP.
func TestClientPrefixMatchesHTTP(t *testing.T) {
	mk := func(trusted []string, h string, v6, v4 int) *admission.ClientIP {
		c, err := admission.NewClientIP(trusted, h, v6, v4)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	trusted := []string{"192.0.2.0/24", "2001:db8:ffff::/48"}
	clients := []*admission.ClientIP{
		nil,
		mk(nil, "X-Forwarded-For", 0, 0),
		mk(trusted, "X-Forwarded-For", 0, 0),
		mk(trusted, "X-Forwarded-For", 48, 24),
		mk(trusted, "Forwarded", 0, 0),
		mk(trusted, "Forwarded", 56, 16),
		mk([]string{"10.0.0.0/8"}, "X-Forwarded-For", 0, 0),
	}
	peers := []string{"192.0.2.7:443", "198.51.100.3:443", "[::ffff:192.0.2.7]:443", "[2001:db8:ffff::9]:443", "[2001:db8::5]:443", "[fe80::1%eth0]:80"}
	forwarded := [][]string{
		nil,
		{"203.0.113.9"},
		{"203.0.113.9, 192.0.2.8"},
		{"2001:db8:aa:bb::1", "192.0.2.9"},
		{"198.51.100.1", "203.0.113.9"},
		{"[2001:db8::1]:80"},
		{"garbage, 192.0.2.8"},
		{"for=203.0.113.9"},
		{`for="[2001:db8:1:2::3]:80";proto=https, for=192.0.2.9`},
		{"for=198.51.100.1, for=_hidden", "for=192.0.2.10"},
	}
	n := 0
	for _, c := range clients {
		for _, pe := range peers {
			for _, lines := range forwarded {
				for _, hdr := range []string{"X-Forwarded-For", "Forwarded"} {
					ap := netip.MustParseAddrPort(pe)
					ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: net.TCPAddrFromAddrPort(ap)})
					md := metadata.MD{}
					r := &http.Request{RemoteAddr: pe, Header: http.Header{}}
					for _, l := range lines {
						md.Append(strings.ToLower(hdr), l)
						r.Header.Add(hdr, l)
					}
					ctx = metadata.NewIncomingContext(ctx, md)
					got, err := grpclimit.ClientPrefix(ctx, c)
					want, werr := httplimit.ClientPrefix(r, c)
					if err != nil || werr != nil || got != want {
						t.Errorf("ClientIP %+v, peer %s, %s %q: grpclimit %v (%v), httplimit %v (%v)", c, pe, hdr, lines, got, err, want, werr)
					}
					gk, err := grpclimit.PeerKey(c)([]byte("x"), ctx)
					hk, werr := httplimit.IPKey(c)([]byte("x"), r)
					if err != nil || werr != nil || string(gk) != string(hk) {
						t.Errorf("ClientIP %+v, peer %s, %s %q: PeerKey %q (%v), IPKey %q (%v)", c, pe, hdr, lines, gk, err, hk, werr)
					}
					n++
				}
			}
		}
	}
	if want := len(clients) * len(peers) * len(forwarded) * 2; n != want {
		t.Fatalf("%d cases checked, want %d", n, want)
	}
	for _, p := range []*peer.Peer{nil, {Addr: &net.UnixAddr{Name: "/tmp/s", Net: "unix"}}, {Addr: (*net.TCPAddr)(nil)}} {
		ctx := context.Background()
		if p != nil {
			ctx = peer.NewContext(ctx, p)
		}
		if _, err := grpclimit.ClientPrefix(ctx, nil); !errors.Is(err, admission.ErrNoClientIP) {
			t.Errorf("peer %v: err %v, want ErrNoClientIP", p, err)
		}
	}
}

// MetadataKey writes httplimit.TokenKey's identity for the same token
// (never the token itself), and refuses what TokenKey refuses.
func TestMetadataKey(t *testing.T) {
	httpID := func(header, value string) string {
		r := &http.Request{Header: http.Header{}}
		r.Header.Set(header, value)
		id, err := httplimit.TokenKey(header)(nil, r)
		if err != nil {
			t.Fatalf("TokenKey(%s: %q): %v", header, value, err)
		}
		return string(id)
	}
	grpcID := func(name string, md ...string) (string, error) {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(md...))
		id, err := grpclimit.MetadataKey(name)([]byte("prefix"), ctx)
		if err == nil && !strings.HasPrefix(string(id), "prefix") {
			t.Fatalf("dst not kept: %q", id)
		}
		return strings.TrimPrefix(string(id), "prefix"), err
	}
	const secret = "sk-live-0123456789abcdef0123456789abcdef-long-enough-to-leave-the-stack"
	for _, tc := range []struct{ name, mdValue, httpHeader, httpValue string }{
		{"authorization", "Bearer " + secret, "Authorization", "Bearer " + secret},
		{"Authorization", "  bEaReR   " + secret + "  ", "Authorization", "Bearer " + secret},
		{"x-api-key", " " + secret, "X-Api-Key", secret},
	} {
		got, err := grpcID(tc.name, strings.ToLower(tc.name), tc.mdValue)
		if err != nil {
			t.Fatalf("%s: %v", tc.mdValue, err)
		}
		if want := httpID(tc.httpHeader, tc.httpValue); got != want {
			t.Errorf("%s %q: identity %q, httplimit's %q", tc.name, tc.mdValue, got, want)
		}
		if strings.Contains(got, "sk-live") {
			t.Errorf("raw token in the identity %q", got)
		}
	}
	for _, md := range [][]string{
		nil,
		{"authorization", "Basic dTpw"},
		{"authorization", "Bearer "},
		{"authorization", "Bearer"},
	} {
		if id, err := grpcID("authorization", md...); !errors.Is(err, grpclimit.ErrNoKey) {
			t.Errorf("%q: identity %q, err %v, want ErrNoKey", md, id, err)
		}
	}
}

type ctxUser struct{}

// FuncKey keeps plain IDs readable, hashes any ID that could hold a
// separator, and rejects kinds that could collide with another KeyFunc.
func TestFuncKey(t *testing.T) {
	user := func(ctx context.Context) (string, bool) {
		s, ok := ctx.Value(ctxUser{}).(string)
		return s, ok
	}
	k := grpclimit.FuncKey("user", user)
	id := func(v any) (string, error) {
		ctx := context.Background()
		if v != nil {
			ctx = context.WithValue(ctx, ctxUser{}, v)
		}
		b, err := k(nil, ctx)
		return string(b), err
	}
	if got, err := id(" alice@example.com "); err != nil || got != "user:alice@example.com" {
		t.Errorf("plain ID: %q, %v", got, err)
	}
	forged, err := id("bob:route:admin")
	if err != nil || !strings.HasPrefix(forged, "user:~") || strings.Contains(forged, ":route:") {
		t.Errorf("ID with separators: %q, %v", forged, err)
	}
	for _, v := range []any{nil, "", "   ", 42} {
		if got, err := id(v); !errors.Is(err, grpclimit.ErrNoKey) {
			t.Errorf("ID %#v: %q, %v, want ErrNoKey", v, got, err)
		}
	}
	// After a prefix, as the pipeline calls it: a blank ID is still no key.
	blank := context.WithValue(context.Background(), ctxUser{}, " \t ")
	if got, err := k([]byte("rl:v1:"), blank); !errors.Is(err, grpclimit.ErrNoKey) {
		t.Errorf("blank ID after a prefix: %q, %v, want ErrNoKey", got, err)
	}
	for _, kind := range []string{"", "ip", "tok", "all", "User", "a:b"} {
		_, err := grpclimit.FuncKey(kind, user)(nil, context.Background())
		if err == nil || errors.Is(err, grpclimit.ErrNoKey) {
			t.Errorf("kind %q: err %v, want a configuration error", kind, err)
		} else if want := `, and not "ip", "tok" or "all", `; !strings.Contains(err.Error(), want) {
			t.Errorf("kind %q: error %q does not name every refused kind (%q)", kind, err, want)
		}
	}
	if _, err := grpclimit.FuncKey("user", nil)(nil, context.Background()); err == nil || errors.Is(err, grpclimit.ErrNoKey) {
		t.Errorf("nil f: err %v, want a configuration error", err)
	}
}
