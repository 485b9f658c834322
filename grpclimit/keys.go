package grpclimit

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/ident"
	"github.com/hotlimit/hotlimit/internal/wire"
)

// ErrNoKey is returned by a key function when the call does not carry the
// identity it looks for (no token in the metadata, no user in the
// context).
var ErrNoKey = errors.New("grpclimit: call has no rate-limit key")

// The key functions below are admission.KeyFunc[context.Context]: each
// appends to dst the identity a call is limited by, such as
// "tok:9f86d081884c7d659a2feaa0c55ad015" or "ip:2001:db8:1:2::/64", from
// the server-side context of the call, which carries the peer
// (google.golang.org/grpc/peer), the incoming metadata and the full
// method name (grpc.Method), or fails (wrapping ErrNoKey or
// admission.ErrNoClientIP) when the call carries no such identity; the
// interceptor then falls back to the client IP (Config.FallbackToIP) or
// refuses the call, never letting it through unlimited. Identities have the format httplimit's have (see
// admission.KeyFunc), so one client gets one key over both; a
// hand-written key function must normalise and escape the same way, or
// one client could forge another's key. FuncKey does it for any function
// that returns an ID.

// MetadataKey returns a key function that limits by a token read from the
// named metadata entry (its first value). For "authorization" it takes
// the credential of the Bearer scheme (the scheme name case-insensitively,
// surrounding spaces trimmed); for any other entry, the trimmed value. A
// missing or empty token, or an authorization entry of another scheme, is
// ErrNoKey. The name is case-insensitive (gRPC metadata keys are
// lower-case).
//
// The identity is "tok:" and the first 128 bits of the token's SHA-256 in
// hex, exactly as httplimit.TokenKey writes it: the raw token never
// reaches the limiter, a backend, a log or a heap dump, and one token has
// the same identity over HTTP and gRPC. Like TokenKey, MetadataKey does
// not check the token: anyone can send a made-up token and get a fresh
// quota. Authenticate before the interceptor (chain it after your auth
// interceptor), or limit unauthenticated calls by PeerKey.
func MetadataKey(name string) admission.KeyFunc[context.Context] {
	name = strings.ToLower(name)
	bearer := name == "authorization"
	return func(dst []byte, ctx context.Context) ([]byte, error) {
		tok, ok := wire.TokenOf(metadata.ValueFromIncomingContext(ctx, name), bearer)
		if !ok {
			return dst, ErrNoKey
		}
		return ident.AppendToken(dst, tok), nil
	}
}

// FuncKey returns a key function that limits by the ID f returns for a call:
// a user or tenant that an earlier interceptor authenticated and put in
// the context, for example. kind names it in the key ("user", "tenant";
// lower-case letters and digits only, and not "ip", "tok" or "all", which
// PeerKey, MetadataKey and admission.Everyone use: otherwise every call
// fails with an error, since two key functions must never write the same
// identity for different clients). f returns ok = false when the call has no such ID
// (ErrNoKey).
//
// The ID is trimmed of surrounding white space and otherwise compared
// exactly. As with httplimit.ContextKey, an ID made only of letters,
// digits and "._@+-", up to 128 bytes, is used as is; any other is
// replaced by "~" and the hex of its SHA-256's first 128 bits, so that no
// ID can contain the key's separators.
func FuncKey(kind string, f func(ctx context.Context) (id string, ok bool)) admission.KeyFunc[context.Context] {
	kindOK := ident.ValidKind(kind) && f != nil
	return func(dst []byte, ctx context.Context) ([]byte, error) {
		if !kindOK {
			return dst, errors.New("grpclimit: FuncKey: kind " + strconv.Quote(kind) + " must be lower-case letters and digits, and not \"ip\", \"tok\" or \"all\", and f must not be nil")
		}
		id, ok := f(ctx)
		if !ok {
			return dst, ErrNoKey
		}
		k := ident.AppendKindID(dst, kind, id)
		if len(k) == len(dst)+len(kind)+1 { // "kind:": id was blank
			return dst, ErrNoKey
		}
		return k, nil
	}
}

// PeerKey returns a key function that limits by the client IP prefix:
// "ip:" and the address, with "/bits" when it is grouped
// ("ip:192.0.2.1", "ip:2001:db8:1:2::/64"), as httplimit.IPKey writes it.
// See ClientPrefix for how the address is found; it fails with
// admission.ErrNoClientIP when the peer is not an IP address (a Unix
// socket, an in-memory listener).
func PeerKey(c *admission.ClientIP) admission.KeyFunc[context.Context] {
	return func(dst []byte, ctx context.Context) ([]byte, error) {
		p, err := ClientPrefix(ctx, c)
		if err != nil {
			return dst, err
		}
		return ident.AppendIP(dst, p), nil
	}
}

// ClientPrefix returns the address of the client of the call in ctx,
// grouped by c's IPv4Bits and IPv6Bits, under exactly httplimit's rules:
// it is admission.ClientIP.Prefix of the connection's peer
// (peer.FromContext) and, only when c trusts the peer as a proxy, of the
// "x-forwarded-for" metadata entries (or "forwarded" with c.Header
// "Forwarded"), which proxies such as Envoy write on the gRPC
// requests they forward. A client that sends its own x-forwarded-for
// directly is not a trusted peer: its entry is ignored. nil c means the
// peer only, IPv6 grouped by /64. It returns admission.ErrNoClientIP
// when the peer is not an IP address.
//
// Build c with admission.NewClientIP, which validates it.
func ClientPrefix(ctx context.Context, c *admission.ClientIP) (netip.Prefix, error) {
	pr, ok := peer.FromContext(ctx)
	if !ok || pr.Addr == nil {
		return netip.Prefix{}, admission.ErrNoClientIP
	}
	var ap netip.AddrPort // the zero AddrPort is ErrNoClientIP
	switch a := pr.Addr.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	default:
		ap, _ = netip.ParseAddrPort(a.String()) // a Unix socket, an in-memory pipe: none
	}
	return c.Prefix(ap, func(name string) []string {
		if name == "Forwarded" {
			return metadata.ValueFromIncomingContext(ctx, "forwarded")
		}
		return metadata.ValueFromIncomingContext(ctx, "x-forwarded-for")
	})
}
