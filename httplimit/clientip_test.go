package httplimit

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/ident"
)

func reqFrom(remote string, header string, lines ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	for _, l := range lines {
		r.Header.Add(header, l)
	}
	return r
}

func mustClientIP(t testing.TB, trusted []string, h string, v6, v4 int) *admission.ClientIP {
	t.Helper()
	c, err := admission.NewClientIP(trusted, h, v6, v4)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientIP(t *testing.T) {
	none := &admission.ClientIP{}
	proxies := []string{"10.0.0.0/8", "2001:db8:ffff::/48", "::ffff:172.16.0.0/108"}
	xff := mustClientIP(t, proxies, "X-Forwarded-For", 0, 0)
	fwd := mustClientIP(t, proxies, "Forwarded", 0, 0)
	v6bits := mustClientIP(t, nil, "X-Forwarded-For", 48, 24)
	const XFF, FWD = "X-Forwarded-For", "Forwarded"
	tests := []struct {
		name   string
		c      *admission.ClientIP
		remote string
		header string
		lines  []string
		want   string // the grouped prefix
	}{
		{"peer v4", none, "192.0.2.1:1234", "", nil, "192.0.2.1/32"},
		{"peer v6 /64", none, "[2001:db8:1:2:3:4:5:6]:443", "", nil, "2001:db8:1:2::/64"},
		{"peer v6 zone stripped", none, "[fe80::1%eth0]:80", "", nil, "fe80::/64"},
		{"peer v4-mapped unmapped", none, "[::ffff:192.0.2.9]:80", "", nil, "192.0.2.9/32"},
		{"peer without port", none, "192.0.2.7", "", nil, "192.0.2.7/32"},
		{"untrusted peer sends XFF: ignored", xff, "192.0.2.1:1", XFF, []string{"203.0.113.5"}, "192.0.2.1/32"},
		{"no trusted proxies: XFF ignored", none, "10.1.1.1:1", XFF, []string{"203.0.113.5"}, "10.1.1.1/32"},
		{"trusted peer, one hop", xff, "10.0.0.1:1", XFF, []string{"203.0.113.5"}, "203.0.113.5/32"},
		{"spoofed left part skipped", xff, "10.0.0.1:1", XFF, []string{"1.1.1.1, 203.0.113.5, 10.0.0.2"}, "203.0.113.5/32"},
		{"multiple lines, last line last", xff, "10.0.0.1:1", XFF, []string{"1.1.1.1, 203.0.113.5", "10.9.9.9"}, "203.0.113.5/32"},
		{"client's own line is first", xff, "10.0.0.1:1", XFF, []string{"6.6.6.6", "198.51.100.7"}, "198.51.100.7/32"},
		{"garbage stops at last trusted hop", xff, "10.0.0.1:1", XFF, []string{"203.0.113.5, garbage, 10.0.0.3"}, "10.0.0.3/32"},
		{"garbage right after peer", xff, "10.0.0.1:1", XFF, []string{"nonsense"}, "10.0.0.1/32"},
		{"empty elements skipped", xff, "10.0.0.1:1", XFF, []string{"203.0.113.5, , "}, "203.0.113.5/32"},
		{"all trusted: leftmost", xff, "10.0.0.1:1", XFF, []string{"10.2.2.2, 10.3.3.3"}, "10.2.2.2/32"},
		{"empty header: peer", xff, "10.0.0.1:1", XFF, []string{""}, "10.0.0.1/32"},
		{"xff v6 with zone", xff, "10.0.0.1:1", XFF, []string{"2001:db8:5:6::1%eth0"}, "2001:db8:5:6::/64"},
		{"xff v4-mapped unmapped", xff, "10.0.0.1:1", XFF, []string{"::ffff:198.51.100.1"}, "198.51.100.1/32"},
		{"xff with port", xff, "10.0.0.1:1", XFF, []string{"198.51.100.1:5555"}, "198.51.100.1/32"},
		{"xff bracketed v6 with port", xff, "10.0.0.1:1", XFF, []string{"[2001:db8:7::1]:80"}, "2001:db8:7::/64"},
		{"trusted v6 proxy", xff, "[2001:db8:ffff::1]:1", XFF, []string{"198.51.100.2"}, "198.51.100.2/32"},
		{"trusted mapped proxy range", xff, "172.16.0.9:1", XFF, []string{"198.51.100.3"}, "198.51.100.3/32"},
		{"forwarded plain", fwd, "10.0.0.1:1", FWD, []string{"for=198.51.100.4"}, "198.51.100.4/32"},
		{"forwarded quoted v6 with port", fwd, "10.0.0.1:1", FWD, []string{`for="[2001:db8:8::1]:4711";proto=https`}, "2001:db8:8::/64"},
		{"forwarded case and spaces", fwd, "10.0.0.1:1", FWD, []string{`proto=http; For = 198.51.100.5 ;by=10.0.0.1`}, "198.51.100.5/32"},
		{"forwarded spoof on left", fwd, "10.0.0.1:1", FWD, []string{"for=1.2.3.4, for=198.51.100.6, for=10.0.0.7"}, "198.51.100.6/32"},
		{"forwarded obfuscated node", fwd, "10.0.0.1:1", FWD, []string{"for=198.51.100.8, for=_hidden, for=10.0.0.9"}, "10.0.0.9/32"},
		{"forwarded unknown node", fwd, "10.0.0.1:1", FWD, []string{"for=unknown"}, "10.0.0.1/32"},
		{"forwarded obfuscated port", fwd, "10.0.0.1:1", FWD, []string{`for="198.51.100.9:_p1"`}, "198.51.100.9/32"},
		{"forwarded comma inside quotes", fwd, "10.0.0.1:1", FWD, []string{`for=198.51.100.10;ext="a,b"`}, "198.51.100.10/32"},
		{"forwarded escaped quote", fwd, "10.0.0.1:1", FWD, []string{`for=198.51.100.11;ext="x\",y"`}, "198.51.100.11/32"},
		{"forwarded unquoted brackets rejected", fwd, "10.0.0.1:1", FWD, []string{`for=[2001:db8::1]`}, "10.0.0.1/32"},
		{"forwarded no for", fwd, "10.0.0.1:1", FWD, []string{"proto=https"}, "10.0.0.1/32"},
		{"forwarded multiple lines", fwd, "10.0.0.1:1", FWD, []string{"for=6.6.6.6", "for=198.51.100.12", "for=10.1.1.1"}, "198.51.100.12/32"},
		{"forwarded ignored when XFF configured", xff, "10.0.0.1:1", FWD, []string{"for=198.51.100.13"}, "10.0.0.1/32"},
		{"xff ignored when Forwarded configured", fwd, "10.0.0.1:1", XFF, []string{"198.51.100.14"}, "10.0.0.1/32"},
		{"xff unknown stops at last trusted hop", xff, "10.0.0.1:1", XFF, []string{"203.0.113.5, unknown, 10.0.0.3"}, "10.0.0.3/32"},
		{"client's unbalanced quote hides nothing on its right", xff, "10.0.0.1:1", XFF, []string{`1.1.1.1, "2.2.2.2, 203.0.113.6`}, "203.0.113.6/32"},
		{"client's quote on its own line", xff, "10.0.0.1:1", XFF, []string{`"`, "203.0.113.7"}, "203.0.113.7/32"},
		{"forwarded unbalanced quote on the left", fwd, "10.0.0.1:1", FWD, []string{`for="1.1.1.1, for=198.51.100.15`}, "198.51.100.15/32"},
		{"forwarded v4-mapped", fwd, "10.0.0.1:1", FWD, []string{`for="[::ffff:198.51.100.16]"`}, "198.51.100.16/32"},
		{"forwarded zone", fwd, "10.0.0.1:1", FWD, []string{`for="[2001:db8:9::1%eth0]:80"`}, "2001:db8:9::/64"},
		{"trusted hop written mapped", xff, "10.0.0.1:1", XFF, []string{"203.0.113.8, ::ffff:10.0.0.2"}, "203.0.113.8/32"},
		{"huge header: the right end counts", xff, "10.0.0.1:1", XFF, []string{strings.Repeat("6.6.6.6, ", 100_000) + "203.0.113.9"}, "203.0.113.9/32"},
		{"huge trusted header: leftmost", xff, "10.0.0.1:1", XFF, []string{strings.Repeat("10.0.0.9, ", 100_000)}, "10.0.0.9/32"},
		{"custom prefix lengths v6", v6bits, "[2001:db8:1:2::1]:1", "", nil, "2001:db8:1::/48"},
		{"custom prefix lengths v4", v6bits, "192.0.2.200:1", "", nil, "192.0.2.0/24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ClientPrefix(reqFrom(tt.remote, tt.header, tt.lines...), tt.c)
			if err != nil {
				t.Fatal(err)
			}
			if p.String() != tt.want {
				t.Errorf("Prefix = %v, want %v", p, tt.want)
			}
		})
	}
}

func TestClientIPNoPeer(t *testing.T) {
	c := mustClientIP(t, []string{"10.0.0.0/8"}, "X-Forwarded-For", 0, 0)
	for _, remote := range []string{"", "@", "not-an-ip:80", "[::1"} {
		_, err := ClientPrefix(reqFrom(remote, "X-Forwarded-For", "198.51.100.1"), c)
		if !errors.Is(err, admission.ErrNoClientIP) {
			t.Errorf("RemoteAddr %q: err = %v, want ErrNoClientIP", remote, err)
		}
	}
}

// TestClientIPSharedNotWritten: a ClientIP in use (here by an IPKey
// serving requests) may be handed to New for another middleware; New
// checks it but must not write to it, or the two race (go test -race).
func TestClientIPSharedNotWritten(t *testing.T) {
	c := mustClientIP(t, []string{"10.0.0.0/8", "::ffff:172.16.0.0/108"}, "X-Forwarded-For", 0, 0)
	key := IPKey(c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			if _, err := key(nil, reqFrom("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1")); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 20 {
		m, err := New(Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Minute}},
			Groups:       []Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          key,
			ClientIP:     c,
		})
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
	}
	<-done
}

// FuzzIPKeyPlainIPv4 checks appendClientIP's IPv4 fast path against the slow
// one (ClientPrefix, then ident.AppendIP): the same key or the same error
// for any RemoteAddr, under every kind of ClientIP, including an
// unvalidated one whose IPv4Bits is out of range.
func FuzzIPKeyPlainIPv4(f *testing.F) {
	for _, s := range []string{
		"192.0.2.10:5555", "0.0.0.0:0", "255.255.255.255:65535", "10.0.0.1:1", "1.2.3.4:99999",
		"1.2.3.4:123456", "01.2.3.4:80", "1.2.3.04:80", "1.2.3.256:80", "1.2.3:80", "1.2.3.4.5:80", "1.2.3.4.5.6:80",
		"1.2.3.4:", "1.2.3.4", "1.2.3.4:8a", "1..3.4:80", ".1.2.3:80", "1.2.3.4::80",
		"[::ffff:1.2.3.4]:80", "[2001:db8::1%eth0]:443", "1.2.3.4%eth0:80", "1.2.3.4:+80", "",
	} {
		f.Add(s)
	}
	clients := []*admission.ClientIP{
		nil, {},
		{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		{IPv4Bits: 24}, {IPv4Bits: 32}, {IPv4Bits: 1}, {IPv4Bits: 31}, {IPv4Bits: 40}, {IPv4Bits: -1},
	}
	f.Fuzz(func(t *testing.T, remote string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "203.0.113.7")
		for _, c := range clients {
			got, err := appendClientIP(c, []byte("x"), r)
			p, werr := ClientPrefix(r, c)
			want := []byte("x")
			if werr == nil {
				want = ident.AppendIP(want, p)
			}
			if (err != nil) != (werr != nil) || string(got) != string(want) {
				t.Fatalf("ClientIP %+v, RemoteAddr %q: key %q, %v; want %q, %v", c, remote, got, err, want, werr)
			}
		}
	})
}
