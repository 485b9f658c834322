package admission

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/ident"
)

// oracleLocalID is id(I) of keys.go's in-process layout, written apart
// from the code under test: netip decides what a canonical IPv4 client
// is.
func oracleLocalID(identity string) string {
	if v, ok := cutPrefix(identity, "ip:"); ok {
		if a, err := netip.ParseAddr(v); err == nil && a.Is4() && a.String() == v {
			b := a.As4()
			return "\x01" + string(b[:])
		}
	}
	return "\x02" + identity
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}

// recorder is a Backend that is not a Local: it admits every request and
// records the layers' keys, as a shared store would receive them.
type recorder struct{ keys []string }

func (b *recorder) AllowStates(_ context.Context, layers []Layer, _ []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	for _, ly := range layers {
		b.keys = append(b.keys, ly.Limit+"="+ly.Key)
	}
	return hotlimit.Decision{Allowed: true, Limit: 10, Remaining: 9}, 0, nil
}
func (b *recorder) Reset(context.Context, string, string) error { return nil }
func (b *recorder) Close() error                                { return nil }

// layoutIdentities are keyIdentities and the identity layers' own.
var layoutLimits = map[string]hotlimit.Policy{
	"g":  hotlimit.FixedWindow{Limit: 1000, Window: time.Hour},
	"id": hotlimit.FixedWindow{Limit: 1000, Window: time.Hour},
}

// newOver returns New(cfg) through backend (nil: a Local), closed with
// the test.
func newOver[R any](t *testing.T, cfg Config[R], backend Backend) *Pipeline[R] {
	t.Helper()
	if backend != nil {
		cfg.Backend = func(map[string]hotlimit.Policy) (Backend, error) { return backend, nil }
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// layoutPipeline limits by identity r[0] in group "a" or "b" (whose
// limit is also the global one's, so that a group key and a global key
// share one limiter), with an identity layer keyed by r[1], through
// backend (nil: a Local).
func layoutPipeline(t *testing.T, backend Backend, exempt ...string) *Pipeline[[2]string] {
	t.Helper()
	cfg := Config[[2]string]{
		Limits: layoutLimits,
		Groups: []Group[[2]string]{{Name: "a", Limit: "g"}, {Name: "b", Limit: "g"}},
		Global: "g",
		Key:    func(dst []byte, r [2]string) ([]byte, error) { return append(dst, r[0]...), nil },
		Identities: []IdentityLayer[[2]string]{{Limit: "id", Key: func(dst []byte, r [2]string) ([]byte, error) {
			return append(dst, r[1]...), nil
		}}},
		ExemptIdentities: exempt,
		Identify:         true,
	}
	return newOver(t, cfg, backend)
}

// TestKeyLayouts: Decide writes each layout's keys in place. Through a
// Local, every identity of keyIdentities, in either group, gets the keys
// of keys.go's layout (checked against oracleLocalID and LayerKey), the
// Local holds one key per (group or none, identity) (so no two share
// one, the group's and the global key in one limiter included), and an
// identity layer's key is its identity's id; through any other backend
// the keys are ident.LayerKey's, byte for byte.
func TestKeyLayouts(t *testing.T) {
	p := layoutPipeline(t, nil)
	local := p.Backend().(*Local)
	rec := &recorder{}
	q := layoutPipeline(t, rec)
	ctx := context.Background()
	for i, id := range keyIdentities {
		other := keyIdentities[(i+7)%len(keyIdentities)]
		for g, name := range []string{"a", "b"} {
			res := p.Decide(ctx, [2]string{id, other}, g, 1)
			if res.Outcome != OutcomeAllowed {
				t.Fatalf("%q in %s: %v %v", id, name, res.Outcome, res.Err)
			}
			want := []string{"\x03" + string(rune(local.groupNumber(name))) + oracleLocalID(id), oracleLocalID(id), oracleLocalID(other)}
			for j, k := range want {
				if got := res.layers[j].Key; got != k {
					t.Fatalf("%q in %s: layer %d key %q, want %q", id, name, j, got, k)
				}
			}
			if want[0] != p.LayerKey(id, name) || want[1] != p.LayerKey(id, "") || want[2] != p.LayerKey(other, "") {
				t.Fatalf("%q in %s: LayerKey gives %q %q %q, Decide %q", id, name, p.LayerKey(id, name), p.LayerKey(id, ""), p.LayerKey(other, ""), want)
			}
			p.Release(res)

			rec.keys = rec.keys[:0]
			res = q.Decide(ctx, [2]string{id, other}, g, 1)
			q.Release(res)
			shared := []string{"g=" + ident.LayerKey(id, name), "g=" + ident.LayerKey(id, ""), "id=" + ident.LayerKey(other, "")}
			if len(rec.keys) != 3 || rec.keys[0] != shared[0] || rec.keys[1] != shared[1] || rec.keys[2] != shared[2] {
				t.Fatalf("%q in %s: a shared store got %q, want %q", id, name, rec.keys, shared)
			}
		}
	}
	// Each identity: its key in groups a and b and its global key, in
	// one limiter; the identity layer's limiter: one key per identity.
	if n, want := local.Classes().Class("g").Len(), 3*len(keyIdentities); n != want {
		t.Errorf("limit g holds %d keys, want %d: two (group or none, identity) share one", n, want)
	}
	if n := local.Classes().Class("id").Len(); n != len(keyIdentities) {
		t.Errorf("limit id holds %d keys, want %d", n, len(keyIdentities))
	}
	// Decide hands a Local views of its Result's buffer, reused by every
	// request after: the Local must hold each key's own bytes.
	for _, id := range keyIdentities {
		for k, want := range map[string]int64{p.LayerKey(id, "a"): 999, p.LayerKey(id, "b"): 999, p.LayerKey(id, ""): 998} {
			if r := local.Classes().Class("g").Check(k, 0).Remaining; r != want {
				t.Fatalf("%q: key %q has %d left, want %d", id, k, r, want)
			}
		}
	}
}

// keeper is a Backend that keeps the keys it is given, as a store may.
type keeper struct{ recorder }

func (b *keeper) AllowStates(ctx context.Context, layers []Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	for _, ly := range layers {
		b.keys = append(b.keys, ly.Key)
	}
	return hotlimit.Decision{Allowed: true, Limit: 10, Remaining: 9}, 0, nil
}

// TestKeysKept: a backend other than a Local may keep the keys it was
// given: they do not change with the requests decided after.
func TestKeysKept(t *testing.T) {
	b := &keeper{}
	p := layoutPipeline(t, b)
	for _, id := range keyIdentities {
		res := p.Decide(context.Background(), [2]string{id, "x:y"}, 0, 1)
		p.Release(res)
	}
	for i, id := range keyIdentities {
		if got, want := b.keys[3*i], ident.LayerKey(id, "a"); got != want {
			t.Fatalf("kept key %d: %q, want %q", i, got, want)
		}
	}
}

// TestKeyLayoutsIdentify: through a Local and through a shared store,
// ExemptIdentities exempt the same identities (an IPv4 client's
// canonical text, not its other spellings), and every identity has the
// same IdentityKind; within a pipeline, IdentityHash tells every two
// identities apart and is the same for one identity in either group.
func TestKeyLayoutsIdentify(t *testing.T) {
	exempt := []string{"ip:192.0.2.1", "tok:9f86d081884c7d659a2feaa0c55ad015", "\x01\x01\x02\x03\x04"}
	local := layoutPipeline(t, nil, exempt...)
	shared := layoutPipeline(t, &recorder{}, exempt...)
	isExempt := map[string]bool{}
	for _, e := range exempt {
		isExempt[e] = true
	}
	ctx := context.Background()
	for name, p := range map[string]*Pipeline[[2]string]{"local": local, "shared": shared} {
		hashes := map[uint64]string{}
		for _, id := range keyIdentities {
			for g := range 2 {
				res := p.Decide(ctx, [2]string{id, "x:y"}, g, 1)
				if got := res.Outcome == OutcomeExempt; got != isExempt[id] {
					t.Errorf("%s: %q exempt %v, want %v", name, id, got, isExempt[id])
				}
				want := shared.kinds.Of([]byte(id))
				if res.IdentityKind != want {
					t.Errorf("%s: %q kind %q, want %q", name, id, res.IdentityKind, want)
				}
				if prev, ok := hashes[res.IdentityHash]; ok && prev != id {
					t.Errorf("%s: %q and %q have one IdentityHash", name, prev, id)
				}
				hashes[res.IdentityHash] = id
				p.Release(res)
			}
		}
		if len(hashes) != len(keyIdentities) {
			t.Errorf("%s: %d hashes for %d identities", name, len(hashes), len(keyIdentities))
		}
	}
}

// addrPipeline limits group "a" (and the global layer) by r.Key's
// identity, or, with addr, by the client address of r.Addr, and an
// identity layer likewise, through backend (nil: a Local).
func addrPipeline(t *testing.T, backend Backend, addr bool, exempt ...string) *Pipeline[addrReq] {
	t.Helper()
	cfg := Config[addrReq]{
		Limits:           layoutLimits,
		Groups:           []Group[addrReq]{{Name: "a", Limit: "g"}},
		Global:           "g",
		Identities:       []IdentityLayer[addrReq]{{Limit: "id"}},
		ExemptIdentities: exempt,
		Identify:         true,
	}
	if addr {
		cfg.ClientAddr = func(r addrReq) (netip.Prefix, error) { return r.pfx, r.err }
	} else { // the transports' key functions before ClientAddr: the text
		text := func(dst []byte, r addrReq) ([]byte, error) {
			if r.err != nil {
				return dst, r.err
			}
			return ident.AppendIP(dst, r.pfx), nil
		}
		cfg.Key, cfg.Identities[0].Key = text, text
	}
	return newOver(t, cfg, backend)
}

type addrReq struct {
	pfx netip.Prefix
	err error
}

// TestClientAddr: a pipeline that limits by Config.ClientAddr (nil Key
// and identity Key) gives every layer the keys a KeyFunc writing the
// address's text gets (ident.AppendIP), through a Local (where an IPv4
// client's keys hold its 4 bytes, written with no text between) and
// through a shared store, byte for byte, with the same exemptions and
// kinds; ClientAddr's error refuses as a key function's does, and so
// does an invalid prefix (ErrNoClientIP).
func TestClientAddr(t *testing.T) {
	prefixes := []string{"192.0.2.1/32", "255.255.255.255/32", "0.0.0.0/32", "192.0.2.0/24", "10.0.0.0/8",
		"2001:db8:1:2::/64", "2001:db8::1/128", "::ffff:192.0.2.1/128", "::/0"}
	exempt := []string{"ip:192.0.2.1", "ip:2001:db8:1:2::/64"}
	ctx := context.Background()
	for _, shared := range []bool{false, true} {
		var ba, bt Backend
		if shared {
			ba, bt = &recorder{}, &recorder{}
		}
		byAddr, byText := addrPipeline(t, ba, true, exempt...), addrPipeline(t, bt, false, exempt...)
		for _, s := range prefixes {
			r := addrReq{pfx: netip.MustParsePrefix(s)}
			ra, rt := byAddr.Decide(ctx, r, 0, 1), byText.Decide(ctx, r, 0, 1)
			if ra.Outcome != rt.Outcome || ra.IdentityKind != rt.IdentityKind || ra.IdentityKind != "ip" {
				t.Errorf("shared %v, %s: %v %q, by text %v %q", shared, s, ra.Outcome, ra.IdentityKind, rt.Outcome, rt.IdentityKind)
			}
			for i := range ra.Layers() {
				if ra.layers[i].Key != rt.layers[i].Key {
					t.Errorf("shared %v, %s: layer %d key %q, by text %q", shared, s, i, ra.layers[i].Key, rt.layers[i].Key)
				}
			}
			if ra.Outcome == OutcomeAllowed && !shared && r.pfx.Addr().Is4() && r.pfx.Bits() == 32 && len(ra.layers[1].Key) != 5 {
				t.Errorf("%s: global key %q, want the 5 bytes of an IPv4 client", s, ra.layers[1].Key)
			}
			byAddr.Release(ra)
			byText.Release(rt)
		}
		errBad := errors.New("no address")
		for _, r := range []addrReq{{err: errBad}, {}} {
			res := byAddr.Decide(ctx, r, 0, 1)
			want := r.err
			if want == nil {
				want = ErrNoClientIP
			}
			if res.Outcome != OutcomeKeyDenied || res.Err != want || res.KeyErr != want {
				t.Errorf("shared %v, %+v: %v %v %v, want key denied with %v", shared, r, res.Outcome, res.Err, res.KeyErr, want)
			}
			byAddr.Release(res)
		}
	}
}

// TestBadKeyFuncLayouts: through a Local and through a shared store, a
// KeyFunc (Config.Key's or an identity layer's) that returns a slice of
// its own, however long, a copy of its dst changed, or writes over the
// start of its dst, refuses
// the request with ErrBadKeyFunc.
func TestBadKeyFuncLayouts(t *testing.T) {
	bad := map[string]KeyFunc[[2]string]{
		"own slice":     func(dst []byte, r [2]string) ([]byte, error) { return []byte("user:someone-else"), nil },
		"own rl:v1 key": func(dst []byte, r [2]string) ([]byte, error) { return []byte("rl:v1:user:x:route:a"), nil },
		"copies dst, changed": func(dst []byte, r [2]string) ([]byte, error) {
			k := append([]byte(nil), dst...)
			k[0] ^= 0x40 // the group key's first byte, or the head's
			return append(k, "user:x"...), nil
		},
		"overwrites dst": func(dst []byte, r [2]string) ([]byte, error) {
			k := append(dst, "user:x"...)
			k[len(dst)-1] ^= 0x40
			return k, nil
		},
	}
	good := func(dst []byte, r [2]string) ([]byte, error) { return append(dst, "user:x"...), nil }
	for _, backend := range []Backend{nil, &recorder{}} {
		for name, fn := range bad {
			for layer := range 2 {
				cfg := Config[[2]string]{
					Limits:     layoutLimits,
					Groups:     []Group[[2]string]{{Name: "a", Limit: "g"}},
					Key:        good,
					Identities: []IdentityLayer[[2]string]{{Limit: "id", Key: good}},
				}
				if layer == 0 {
					cfg.Key = fn
				} else {
					cfg.Identities[0].Key = fn
				}
				if backend != nil {
					b := backend
					cfg.Backend = func(map[string]hotlimit.Policy) (Backend, error) { return b, nil }
				}
				p, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				res := p.Decide(context.Background(), [2]string{}, 0, 1)
				if res.Outcome != OutcomeKeyDenied || res.Err != ErrBadKeyFunc {
					t.Errorf("backend %T, %s in layer %d: %v %v, want ErrBadKeyFunc", backend, name, layer, res.Outcome, res.Err)
				}
				p.Release(res)
				if backend == nil {
					p.Close()
				}
			}
		}
	}
}
