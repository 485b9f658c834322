package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"

	"github.com/hotlimit/hotlimit/internal/ident"
)

// keyPrefix begins every key a Pipeline builds. The "v1" is the key
// format's version: a change of format changes it, so that old and new
// keys never mix in a shared store.
const keyPrefix = "rl:v1:"

// LayerKey returns the key a Pipeline limits identity by in group group:
// "rl:v1:" + identity + ":route:" + group, or, for group "", the key of
// the layers keyed by the identity alone (the global layer, an
// identity's layer): "rl:v1:" + identity. Use it to inspect or refund a
// client's state in a backend.
func LayerKey(identity, group string) string {
	if group == "" {
		return keyPrefix + identity
	}
	return keyPrefix + identity + ":route:" + group
}

// An identity is a short kind, a colon, and a value that cannot contain
// ":route:": "tok:9f86d081884c7d659a2feaa0c55ad015", "ip:192.0.2.1",
// "tenant:acme". The functions below write the kinds the transports share
// alike, so that one client limited over HTTP and over gRPC through one
// backend gets the same keys.

// AppendToken appends the identity of an API token: "tok:" and the first
// 128 bits of its SHA-256, in hex (trim it first: TokenOf does). The raw token never
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

// TokenIdentity returns the identity of token, trimmed of surrounding
// white space, as AppendToken writes it.
func TokenIdentity(token string) string {
	return string(AppendToken(nil, strings.TrimSpace(token)))
}

// BearerToken returns the credential of an Authorization value of the
// Bearer scheme (the scheme name case-insensitively, surrounding spaces
// trimmed), and false for another scheme or an empty credential.
func BearerToken(v string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimSpace(cred)
	return cred, cred != ""
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

// ValidKind reports whether kind may name an application identity
// (AppendID): lower-case letters and digits, and not "ip" or "tok", which
// AppendIP and AppendToken write: two identities of different clients
// must never be equal.
func ValidKind(kind string) bool {
	if kind == "" || kind == "ip" || kind == "tok" {
		return false
	}
	for i := 0; i < len(kind); i++ {
		if c := kind[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// AppendID appends the identity kind:id of an ID the application
// authenticated (a user, a tenant). id is trimmed of surrounding white
// space; made only of letters, digits and "._@+-", up to 128 bytes, it is
// used as is, so it reads well in logs; any other is replaced by "~" and
// the hex of its SHA-256's first 128 bits, so that no ID can contain a
// key's separators. The caller checks kind with ValidKind.
func AppendID(dst []byte, kind, id string) []byte {
	dst = append(dst, kind...)
	dst = append(dst, ':')
	return ident.AppendID(dst, strings.TrimSpace(id))
}
