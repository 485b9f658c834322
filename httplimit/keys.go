package httplimit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/ident"
	"github.com/hotlimit/hotlimit/internal/wire"
)

// ErrNoKey is returned by a key function when the request does not carry the
// identity it looks for (no token, no user in the context).
var ErrNoKey = errors.New("httplimit: request has no rate-limit key")

// The key functions below are admission.KeyFunc[*http.Request]: each
// appends to dst the identity a request is limited by, such as
// "tok:9f86d081884c7d659a2feaa0c55ad015" or "ip:2001:db8:1:2::/64", or
// fails (wrapping ErrNoKey or admission.ErrNoClientIP) when the request
// carries no such identity; the middleware then applies
// Config.FallbackToIP or refuses it, never letting it through unlimited. They
// normalise and escape so that one identity cannot forge another's key
// (IDs never hold a colon, IP addresses are printed by net/netip); write
// your own the same way (see admission.KeyFunc).

// TokenKey returns a key function that limits by an API token read from the
// named header. For "Authorization" it takes the credential of the Bearer
// scheme (the scheme name case-insensitively, surrounding spaces
// trimmed); for any other header, the trimmed value. An empty token, or
// an Authorization header of another scheme, is ErrNoKey. An invalid
// header name (empty, or not an HTTP token) fails every call with an
// error that is not ErrNoKey: it is a configuration error, not a request
// without a token.
//
// TokenKey does not check the token: anyone can send a new made-up token
// with each request and get a fresh quota each time. Refuse unknown
// tokens before the middleware (as examples/server does), or
// authenticate first and limit by ContextKey.
//
// The token never enters the limiter: the identity is "tok:" and the
// first 128 bits of its SHA-256, in hex. The limiter's keys live in
// memory (and, with a shared backend, in Redis), are handed to hooks, and
// end up in logs, metrics labels and heap dumps; a raw token in any of
// them is a credential leak. An API token has enough entropy that its
// plain SHA-256 cannot be inverted, and a plain hash gives the same key on
// every instance sharing a backend. For low-entropy secrets use
// TokenKeyHMAC.
func TokenKey(header string) admission.KeyFunc[*http.Request] {
	return tokenKey(header, nil)
}

// TokenIdentity returns the identity TokenKey gives a request that
// presents token: "tok:" and the first 128 bits of the trimmed token's
// SHA-256, in hex. Use it to find or reset a client's state
// (Middleware.Reset, LayerKey) from the token an operator was given.
func TokenIdentity(token string) string { return admission.TokenIdentity(token) }

// TokenKeyHMAC is TokenKey with HMAC-SHA256 under secret instead of a
// plain SHA-256: use it when tokens are short enough to be guessed and
// checked against a leaked key. Every instance sharing a backend must use
// the same secret. It allocates a little more per request than TokenKey.
// An empty secret is a configuration error: every call fails with an
// error (rather than quietly hashing without a key).
func TokenKeyHMAC(header string, secret []byte) admission.KeyFunc[*http.Request] {
	if len(secret) == 0 {
		return func(dst []byte, _ *http.Request) ([]byte, error) {
			return dst, errors.New("httplimit: TokenKeyHMAC: empty secret")
		}
	}
	return tokenKey(header, append([]byte(nil), secret...))
}

func tokenKey(header string, secret []byte) admission.KeyFunc[*http.Request] {
	if err := checkHeaderName(header); err != nil {
		return func(dst []byte, _ *http.Request) ([]byte, error) { return dst, err }
	}
	bearer := strings.EqualFold(header, "Authorization")
	canon := http.CanonicalHeaderKey(header)
	return func(dst []byte, r *http.Request) ([]byte, error) {
		tok, ok := wire.TokenOf(r.Header[canon], bearer)
		if !ok {
			return dst, ErrNoKey
		}
		if secret == nil {
			return ident.AppendToken(dst, tok), nil
		}
		sum := hmacSum(secret, tok)
		dst = append(dst, "tok:"...)
		return hex.AppendEncode(dst, sum[:16]), nil
	}
}

// ContextKey returns a key function that limits by an identity the
// application has authenticated and stored in the request's context
// under ctxKey as a string: a user ID, a tenant. kind names it in the key
// ("user", "tenant"; lower-case letters and digits only, and not "ip",
// "tok" or "all", which IPKey, TokenKey and admission.Everyone use, or
// every call fails with an error: two key functions must never produce
// the same key for different identities).
//
// The value is trimmed of surrounding white space and otherwise compared
// exactly (IDs are often case-sensitive; fold case in the application if
// yours are not). A value made only of letters, digits and "._@+-", up to
// 128 bytes, is used as is, so it reads well in logs; any other value is
// replaced by "~" and the hex of its SHA-256's first 128 bits, so that no
// value can contain the key's separators. A missing, non-string or empty
// value is ErrNoKey.
func ContextKey(kind string, ctxKey any) admission.KeyFunc[*http.Request] {
	kindOK := ident.ValidKind(kind)
	return func(dst []byte, r *http.Request) ([]byte, error) {
		if !kindOK {
			return dst, errors.New("httplimit: ContextKey: kind " + strconv.Quote(kind) + " must be lower-case letters and digits, and not \"ip\", \"tok\" or \"all\"")
		}
		id, _ := r.Context().Value(ctxKey).(string)
		k := ident.AppendKindID(dst, kind, id)
		if len(k) == len(dst)+len(kind)+1 { // "kind:": id was blank
			return dst, ErrNoKey
		}
		return k, nil
	}
}

// IPKey returns a key function that limits by the client IP prefix that c
// finds (see admission.ClientIP and ClientPrefix): "ip:192.0.2.1" or
// "ip:2001:db8:1:2::/64". A nil c uses the peer address only, IPv6
// grouped by /64. It fails with admission.ErrNoClientIP when the peer
// address is not an IP.
func IPKey(c *admission.ClientIP) admission.KeyFunc[*http.Request] {
	return func(dst []byte, r *http.Request) ([]byte, error) {
		return appendClientIP(c, dst, r)
	}
}

// hmacSum returns HMAC-SHA256(secret, tok). It is a separate function so
// that TokenKey's plain path keeps its buffers on the stack.
func hmacSum(secret []byte, tok string) (sum [sha256.Size]byte) {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(tok))
	h.Sum(sum[:0])
	return sum
}

// LayerKey returns the key the middleware limits identity by in route
// group group, or, for group "", the key of the global layer and of the
// Config.Identities layers, in its backend: for a shared store (Redis,
// leases) the rl:v1: layout's, "rl:v1:" + identity + ":route:" + group
// and "rl:v1:" + identity; for the in-process admission.Local a shorter
// form (Pipeline.LayerKey). Use it to inspect or refund a client's state
// in the backend. It returns "" for a group the middleware does not have.
func (m *Middleware) LayerKey(identity, group string) string { return m.pipe.LayerKey(identity, group) }

// checkHeaderName reports a header name that no request can carry (empty,
// or not an RFC 9110 token): a token read from it would never be found.
func checkHeaderName(name string) error {
	ok := name != ""
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
	}
	if !ok {
		return fmt.Errorf("httplimit: token header %q is not a valid header name", name)
	}
	return nil
}
