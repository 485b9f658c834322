package ident

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strconv"
)

// KeyPrefix begins every key a pipeline builds. The "v1" is the key
// format's version: a change of format changes it, so that old and new
// keys never mix in a shared store.
const KeyPrefix = "rl:v1:"

// LayerKey returns the key a pipeline limits identity by in group group
// in a shared store (every backend but the in-process one):
// "rl:v1:" + identity + ":route:" + group, or, for group "", the key of
// the layers keyed by the identity alone (the global layer, an
// identity's layer): "rl:v1:" + identity.
func LayerKey(identity, group string) string {
	if group == "" {
		return KeyPrefix + identity
	}
	return KeyPrefix + identity + ":route:" + group
}

// AppendToken appends the identity of an API token: "tok:" and the first
// 128 bits of its SHA-256, in hex (trim it first). The raw token never
// enters a key: an API token has enough entropy that its plain SHA-256
// cannot be inverted, and a plain hash gives the same key on every
// instance sharing a backend. It hashes from dst's spare capacity, so it
// allocates nothing when dst has room for the token.
func AppendToken(dst []byte, tok string) []byte {
	n := len(dst)
	tmp := append(dst, tok...)
	sum := sha256.Sum256(tmp[n:])
	clear(tmp[n:])
	dst = append(tmp[:n], "tok:"...)
	return hex.AppendEncode(dst, sum[:16])
}

// AppendIP appends the identity of a client address or prefix: "ip:" and
// the address, with "/bits" when it is grouped ("ip:192.0.2.1",
// "ip:2001:db8:1:2::/64").
func AppendIP(dst []byte, p netip.Prefix) []byte {
	dst = append(dst, "ip:"...)
	dst = p.Addr().AppendTo(dst)
	if p.Bits() != p.Addr().BitLen() {
		dst = append(dst, '/')
		dst = strconv.AppendInt(dst, int64(p.Bits()), 10)
	}
	return dst
}
