package admission

import (
	"context"
	"fmt"
	"github.com/hotlimit/hotlimit/internal/ident"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// localKey is the in-process key of identity in group index g, or of no
// group for g < 0, as Pipeline.layerKey writes it for a Local backend.
func localKey(identity string, g int) string {
	var key []byte
	if g >= 0 {
		key = localHead(uint64(g))
	}
	return string(appendLocalID(key, []byte(identity)))
}

// keyIdentities are identities of every kind and form, those that look
// like another's in-process key among them: a canonical IPv4 client and
// its non-canonical spellings, one whose bytes are another's compact
// form, one that starts like a group's key, IPv6, prefixes, application
// IDs, empty-ish and binary ones, and one too long for a Result's buffer.
var keyIdentities = []string{
	"ip:192.0.2.1", "ip:0.0.0.0", "ip:255.255.255.255", "ip:1.2.3.4", "ip:01.2.3.4", "ip:1.2.3.04",
	"ip:1.2.3.4/32", "ip:1.2.3.0/24", "ip:256.2.3.4", "ip:1.2.3", "ip:1.2.3.4.5", "ip:1..3.4", "ip:1.2.3.4 ",
	"ip:2001:db8::1", "ip:::ffff:1.2.3.4", "ip:2001:db8:1:2::/64",
	"\x01\x01\x02\x03\x04", "\x01\xc0\x00\x02\x01", "\x02ip:1.2.3.4", "\x02\x01\x01\x02\x03\x04",
	"\x03\x00\x01\x01\x02\x03\x04", "\x03\x01ip:1.2.3.4", "\x00", "\x04x",
	"tok:9f86d081884c7d659a2feaa0c55ad015", "tenant:acme", "user:~ab", "ip", "i", "x", "ip:",
	"user:" + strings.Repeat("long", 80), // past a Result's buffer: the key function grows it
}

// TestLocalKeysDistinct: no two distinct (group or none, identity) get
// one in-process key, for every pair of keyIdentities and of groups 0 to
// 300 (a uvarint of one and two bytes) and none; the keys of every
// identity that is not a canonical IPv4 client keep the identity's bytes.
func TestLocalKeysDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, id := range keyIdentities {
		for g := -1; g <= 300; g++ {
			k := localKey(id, g)
			what := fmt.Sprintf("(%q, group %d)", id, g)
			if prev, ok := seen[k]; ok {
				t.Fatalf("%s and %s have one key %q", prev, what, k)
			}
			seen[k] = what
		}
		if _, ok := parseIPv4([]byte(id)); !ok && !strings.Contains(localKey(id, -1), id) {
			t.Errorf("%q: key %q does not hold the identity", id, localKey(id, -1))
		}
	}
}

// TestParseIPv4: parseIPv4 accepts exactly what AppendIP writes of an
// IPv4 address, and gives back that address: on every address's text,
// and on random strings of digits and dots, checked against netip.
func TestParseIPv4(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		var a [4]byte
		for i := range a {
			a[i] = byte(rng.IntN(256))
		}
		id := ident.AppendIP(nil, netip.PrefixFrom(netip.AddrFrom4(a), 32))
		if got, ok := parseIPv4(id); !ok || got != a {
			t.Fatalf("%q: %v %v, want %v", id, got, ok, a)
		}
	}
	const alphabet = "0123456789.../x"
	for range 200000 {
		b := []byte("ip:")
		for range 1 + rng.IntN(17) {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		addr, err := netip.ParseAddr(string(b[3:]))
		canonical := err == nil && addr.Is4() && addr.String() == string(b[3:])
		got, ok := parseIPv4(b)
		if ok != canonical || ok && got != addr.As4() {
			t.Fatalf("%q: %v %v; netip: %v %v", b, got, ok, addr, err)
		}
	}
}

// FuzzLocalKeys: two distinct (group or none, identity) never get one
// in-process key.
func FuzzLocalKeys(f *testing.F) {
	for i, id := range keyIdentities {
		f.Add(id, int16(i%3-1), keyIdentities[(i+1)%len(keyIdentities)], int16(i%2))
	}
	f.Fuzz(func(t *testing.T, a string, ga int16, b string, gb int16) {
		na, nb := max(int(ga), -1), max(int(gb), -1)
		if (a != b || na != nb) && localKey(a, na) == localKey(b, nb) {
			t.Fatalf("(%q, %d) and (%q, %d) have one key %q", a, na, b, nb, localKey(a, na))
		}
	})
}

// TestLocalKeysFit: with a Local backend, every layer's key of an IPv4
// client fits the core's 15-byte inline slot, even the longest address
// in a group past the 128th; Decide limits by the keys Pipeline.LayerKey
// gives, and Reset resets them. With another backend the keys are
// LayerKey's, unchanged.
func TestLocalKeysFit(t *testing.T) {
	groups := make([]Group[string], 200)
	for i := range groups {
		groups[i] = Group[string]{Name: fmt.Sprint("g", i), Limit: "l"}
	}
	cfg := Config[string]{
		Limits: map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 10, Window: time.Hour}, "all": hotlimit.FixedWindow{Limit: 10, Window: time.Hour}, "id": hotlimit.FixedWindow{Limit: 10, Window: time.Hour}},
		Groups: groups,
		Global: "all",
		Key:    func(dst []byte, r string) ([]byte, error) { return append(dst, r...), nil },
		Identities: []IdentityLayer[string]{{Limit: "id", Key: func(dst []byte, r string) ([]byte, error) {
			return append(dst, "tenant:acme"...), nil
		}}},
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	local := p.Backend().(*Local)
	const id = "ip:255.255.255.255"
	for _, g := range []string{"g0", "g199"} {
		k := p.LayerKey(id, g)
		if len(k) > 15 || len(p.LayerKey(id, "")) > 15 {
			t.Fatalf("group %s: keys %q and %q, over 15 bytes", g, k, p.LayerKey(id, ""))
		}
		gi := 0
		fmt.Sscan(g[1:], &gi)
		res := p.Decide(context.Background(), id, gi, 1)
		if res.Outcome != OutcomeAllowed {
			t.Fatalf("group %s: %v %v", g, res.Outcome, res.Err)
		}
		p.Release(res)
		if r := local.Classes().Class("l").Check(k, 0).Remaining; r != 9 {
			t.Fatalf("group %s: the group layer's key %q has %d left, want 9", g, k, r)
		}
	}
	if r := local.Classes().Class("all").Check(p.LayerKey(id, ""), 0).Remaining; r != 8 {
		t.Fatalf("global key: %d left, want 8", r)
	}
	if r := local.Classes().Class("id").Check(p.LayerKey("tenant:acme", ""), 0).Remaining; r != 8 {
		t.Fatalf("identity layer's key: %d left, want 8", r)
	}
	if local.Classes().Class("l").Len() != 2 || local.Classes().Class("all").Len() != 1 || local.Classes().Class("id").Len() != 1 {
		t.Fatalf("keys held: %d %d %d, want 2 1 1", local.Classes().Class("l").Len(), local.Classes().Class("all").Len(), local.Classes().Class("id").Len())
	}
	if err := p.Reset(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if r := local.Classes().Class("l").Check(p.LayerKey(id, "g199"), 0).Remaining; r != 10 {
		t.Fatalf("after Reset: %d left, want 10", r)
	}
	// Any other backend: LayerKey's keys.
	cfg.Backend = func(limits map[string]hotlimit.Policy) (Backend, error) {
		l, err := newLocal(limits)
		return byName{l}, err
	}
	q, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if k := q.LayerKey(id, "g1"); k != ident.LayerKey(id, "g1") || k != "rl:v1:"+id+":route:g1" {
		t.Fatalf("another backend's key %q, want LayerKey's", k)
	}
	res := q.Decide(context.Background(), id, 1, 1)
	q.Release(res)
	inner := q.Backend().(byName).Local
	if r := inner.Classes().Class("l").Check("rl:v1:"+id+":route:g1", 0).Remaining; r != 9 {
		t.Fatalf("another backend: the shared key has %d left, want 9", r)
	}
	if r := inner.Classes().Class("all").Check("rl:v1:"+id, 0).Remaining; r != 9 {
		t.Fatalf("another backend: the shared global key has %d left, want 9", r)
	}
	if p.LayerKey(id, "nope") != "" {
		t.Fatal("LayerKey of an unknown group is not empty")
	}
}
