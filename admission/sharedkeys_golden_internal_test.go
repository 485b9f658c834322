package admission

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/ident"
)

// genReq is a request of TestSharedKeysGolden: an IP prefix (kind 0), a
// token (1) or a tenant (2) identity, and a tenant for the identity layer.
type genReq struct {
	kind      int
	s, tenant string
}

// genKey is the group key function of genReq: the identity it names.
func genKey(dst []byte, r genReq) ([]byte, error) {
	switch r.kind {
	case 0:
		return ident.AppendIP(dst, netip.MustParsePrefix(r.s)), nil
	case 1:
		return ident.AppendToken(dst, r.s), nil
	}
	return ident.AppendID(append(dst, "tenant:"...), r.s), nil
}

// genReqs are IPv4, IPv6, IPv4-mapped IPv6 clients, /24, /64 and /0
// prefixes, tokens and tenants with separator-like bytes.
var genReqs = []genReq{
	{0, "192.0.2.1/32", "acme"}, {0, "192.0.2.0/24", "acme"}, {0, "2001:db8::1/128", "a:b"},
	{0, "2001:db8:1:2::/64", "a/b"}, {0, "::ffff:192.0.2.1/128", "a\x00b"}, {0, "0.0.0.0/0", ""},
	{1, "9f86d081884c7d659a2feaa0c55ad015", "t"}, {1, "a:b/c\x00d", "t"}, {1, "rl:v1:x:route:a", "t"},
	{2, "acme", "acme"}, {2, "a:b", "a/b"}, {2, "x\x00:route:y", "z"},
}

// TestSharedKeysGolden: a shared store keeps its state across an
// upgrade only if it is handed the same keys. The keys a Backend that is
// not a Local receives for genReqs, in two groups of each of two
// pipelines sharing the backend (group, global and identity layers),
// are those of testdata/sharedkeys.golden, recorded on 6eebb8b (before
// Decide wrote keys in place): byte for byte, and so are those of a
// pipeline whose nil Key takes an IP client from ClientAddr.
func TestSharedKeysGolden(t *testing.T) {
	golden, err := os.ReadFile("testdata/sharedkeys.golden")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.SplitAfter(string(golden), "\n")
	limits := map[string]hotlimit.Policy{"g": hotlimit.FixedWindow{Limit: 1000, Window: time.Hour}, "t": hotlimit.FixedWindow{Limit: 1000, Window: time.Hour}}
	rec := &recorder{} // a shared store
	mk := func(addr bool, groups ...string) *Pipeline[genReq] {
		cfg := Config[genReq]{Limits: limits, Key: genKey, Global: "g",
			Identities: []IdentityLayer[genReq]{{Limit: "t", Key: func(dst []byte, r genReq) ([]byte, error) {
				return ident.AppendID(append(dst, "tenant:"...), r.tenant), nil
			}}},
			Backend: func(map[string]hotlimit.Policy) (Backend, error) { return rec, nil }}
		if addr {
			cfg.Key, cfg.ClientAddr = nil, func(r genReq) (netip.Prefix, error) { return netip.ParsePrefix(r.s) }
		}
		for _, g := range groups {
			cfg.Groups = append(cfg.Groups, Group[genReq]{Name: g, Limit: "g"})
		}
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	for _, addr := range []bool{false, true} {
		ps := []*Pipeline[genReq]{mk(addr, "a", "search.v2"), mk(addr, "a", "other_x-1")}
		n := 0
		for pi, p := range ps {
			for g := range 2 {
				for _, r := range genReqs {
					if addr && r.kind != 0 {
						n++ // no IP client
						continue
					}
					rec.keys = rec.keys[:0]
					res := p.Decide(context.Background(), r, g, 1)
					if res.Err != nil {
						t.Fatal(res.Err)
					}
					p.Release(res)
					got := fmt.Sprintf("%d %d %q %q\n", pi, g, r, rec.keys)
					if n >= len(want) || got != want[n] {
						t.Errorf("ClientAddr %v: line %d:\n got %s want %s", addr, n+1, got, want[n])
					}
					n++
				}
			}
		}
	}
}

// TestSharedKeyEveryone: an identity layer keyed by Everyone gives a
// shared store one key for every client, "rl:v1:all:*" (the keys of
// TestSharedKeysGolden's format; Everyone came after them), whoever
// asks, beside each client's own group and global keys.
func TestSharedKeyEveryone(t *testing.T) {
	rec := &recorder{}
	p, err := New(Config[genReq]{
		Limits:     map[string]hotlimit.Policy{"g": hotlimit.FixedWindow{Limit: 1000, Window: time.Hour}, "all": hotlimit.FixedWindow{Limit: 1000, Window: time.Hour}},
		Groups:     []Group[genReq]{{Name: "a", Limit: "g"}},
		Key:        genKey,
		Global:     "g",
		Identities: []IdentityLayer[genReq]{{Limit: "all", Key: Everyone[genReq]}},
		Backend:    func(map[string]hotlimit.Policy) (Backend, error) { return rec, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, tc := range []struct {
		r    genReq
		want string
	}{
		{genReq{s: "192.0.2.7/32"}, `["g=rl:v1:ip:192.0.2.7:route:a" "g=rl:v1:ip:192.0.2.7" "all=rl:v1:all:*"]`},
		{genReq{s: "2001:db8::/64"}, `["g=rl:v1:ip:2001:db8::/64:route:a" "g=rl:v1:ip:2001:db8::/64" "all=rl:v1:all:*"]`},
	} {
		rec.keys = rec.keys[:0]
		res := p.Decide(context.Background(), tc.r, 0, 1)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		p.Release(res)
		if got := fmt.Sprintf("%q", rec.keys); got != tc.want {
			t.Errorf("%v: keys %s, want %s", tc.r, got, tc.want)
		}
	}
}
