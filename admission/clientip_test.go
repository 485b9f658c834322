package admission

import (
	"net/netip"
	"strings"
	"testing"
)

func TestNewClientIPErrors(t *testing.T) {
	for _, tt := range []struct {
		trusted []string
		h       string
		v6, v4  int
	}{
		{[]string{"10.0.0.0/33"}, "X-Forwarded-For", 0, 0},
		{[]string{"nonsense"}, "X-Forwarded-For", 0, 0},
		{nil, "X-Forwarded-For", 129, 0},
		{nil, "X-Forwarded-For", 0, 33},
		{nil, "X-Forwarded-For", -1, 0},
		{nil, "X-Real-IP", 0, 0},
		{nil, "Forwarded-For", 0, 0},
	} {
		if _, err := NewClientIP(tt.trusted, tt.h, tt.v6, tt.v4); err == nil {
			t.Errorf("NewClientIP(%v, %q, %d, %d): no error", tt.trusted, tt.h, tt.v6, tt.v4)
		}
	}
	c, err := NewClientIP([]string{" 10.0.0.1 ", "::ffff:10.9.0.0/112"}, "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32"), netip.MustParsePrefix("10.9.0.0/16")}
	for i, p := range c.TrustedProxies {
		if p != want[i] {
			t.Errorf("TrustedProxies[%d] = %v, want %v", i, p, want[i])
		}
	}
}

// TestClientIPHeaderCase: Header names a header in any letter case, as
// HTTP does: "forwarded" reads RFC 7239 Forwarded, "x-forwarded-for" and
// "" X-Forwarded-For.
func TestClientIPHeaderCase(t *testing.T) {
	lines := map[string][]string{"X-Forwarded-For": {"198.51.100.1"}, "Forwarded": {"for=203.0.113.9"}}
	header := func(name string) []string { return lines[name] }
	peer := netip.MustParseAddrPort("10.0.0.1:80")
	for h, want := range map[string]string{
		"": "198.51.100.1/32", "X-Forwarded-For": "198.51.100.1/32", "x-forwarded-for": "198.51.100.1/32",
		"Forwarded": "203.0.113.9/32", "forwarded": "203.0.113.9/32", "FORWARDED": "203.0.113.9/32",
	} {
		c, err := NewClientIP([]string{"10.0.0.0/8"}, h, 0, 0)
		if err != nil {
			t.Fatalf("NewClientIP(Header %q): %v", h, err)
		}
		if p, err := c.Prefix(peer, header); err != nil || p.String() != want {
			t.Errorf("Header %q: Prefix = %v, %v, want %s", h, p, err, want)
		}
	}
}

// FuzzClientIP checks that no header content panics, that the result is
// always a valid prefix, and that with no trusted proxies the headers
// never matter: the result is always the peer address's grouping. Behind
// a trusted proxy reading X-Forwarded-For, the address is the peer or one
// of the header's comma-separated elements (never one the parser made
// up), and if it is not the peer the peer is trusted. Grouped by 128 and
// 32 bits, the prefix is the address itself.
func FuzzClientIP(f *testing.F) {
	f.Add("192.0.2.1:80", "203.0.113.5, 10.0.0.1", "for=198.51.100.1")
	f.Add("[2001:db8::1%eth0]:443", "::ffff:1.2.3.4", `for="[2001:db8::2]:80"`)
	f.Add("10.0.0.1:1", "garbage,,", `for="_hidden";by=x, for=unknown`)
	f.Add("10.0.0.1:1", `"1.2.3.4"`, `for="\"`)
	f.Add("10.0.0.1:1", "[::1]:99999", `for=";for=1.2.3.4`)
	none := &ClientIP{}
	xff := &ClientIP{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	fwd := &ClientIP{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Header: "Forwarded"}
	xffFull := &ClientIP{TrustedProxies: xff.TrustedProxies, IPv6Bits: 128, IPv4Bits: 32}
	f.Fuzz(func(t *testing.T, remote, xffVal, fwdVal string) {
		header := func(name string) []string {
			switch name {
			case "X-Forwarded-For":
				return []string{xffVal, xffVal}
			case "Forwarded":
				return []string{fwdVal}
			}
			t.Fatalf("header %q asked for", name)
			return nil
		}
		ap, _ := netip.ParseAddrPort(remote) // the zero AddrPort when it does not parse
		peer, peerOK := normalize(ap.Addr())
		for _, c := range []*ClientIP{none, xff, fwd} {
			p, err := c.Prefix(ap, header)
			if !peerOK {
				if err == nil {
					t.Fatalf("no peer address in %q, but Prefix = %v", remote, p)
				}
				continue
			}
			if err != nil || !p.IsValid() {
				t.Fatalf("Prefix = %v, %v", p, err)
			}
			if c == none && p != c.group(peer) {
				t.Fatalf("no trusted proxies: Prefix = %v, want the peer's %v", p, c.group(peer))
			}
		}
		if !peerOK {
			return
		}
		if a, _ := fwd.addr(ap, header); a != peer && !fwd.trusted(peer) {
			t.Fatalf("untrusted peer %v, but Forwarded gave Addr = %v", peer, a)
		}
		a, _ := xff.addr(ap, header)
		if p, err := xffFull.Prefix(ap, header); err != nil || p.Addr() != a || p.Bits() != a.BitLen() {
			t.Fatalf("IPv6Bits 128, IPv4Bits 32: Prefix = %v, %v, want the address %v itself", p, err, a)
		}
		if a == peer {
			return
		}
		if !xff.trusted(peer) {
			t.Fatalf("untrusted peer %v, but Addr = %v", peer, a)
		}
		for _, e := range strings.Split(xffVal, ",") {
			if h, ok := parseNode(strings.TrimSpace(e)); ok && h == a {
				return
			}
		}
		t.Fatalf("Addr = %v is neither the peer %v nor an element of %q", a, peer, xffVal)
	})
}
