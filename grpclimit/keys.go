package grpclimit

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
)

// ErrNoKey is returned by a KeyFunc when the call does not carry the
// identity it looks for (no token in the metadata, no user in the
// context).
var ErrNoKey = errors.New("grpclimit: call has no rate-limit key")

// A KeyFunc appends to dst the identity a call is limited by, such as
// "tok:9f86d081884c7d659a2feaa0c55ad015" or "ip:2001:db8:1:2::/64", and
// returns the extended slice. ctx is the server-side context of the call:
// it carries the peer (google.golang.org/grpc/peer), the incoming
// metadata and the full method name (grpc.Method). It returns an error
// (wrapping ErrNoKey or httplimit.ErrNoClientIP) when the call carries no
// such identity; the interceptor then applies Config.OnKeyError, never
// letting the call through unlimited.
//
// An identity has httplimit's format: a short kind, a colon, and a value
// that cannot contain ":route:". The functions of this package normalise
// and escape accordingly; a hand-written KeyFunc must too, or one client
// could forge another's key. FuncKey does it for any function that
// returns an ID.
type KeyFunc func(ctx context.Context, dst []byte) ([]byte, error)

// MetadataKey returns a KeyFunc that limits by a token read from the
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
func MetadataKey(name string) KeyFunc {
	name = strings.ToLower(name)
	bearer := name == "authorization"
	return func(ctx context.Context, dst []byte) ([]byte, error) {
		tok, ok := admission.TokenOf(metadata.ValueFromIncomingContext(ctx, name), bearer)
		if !ok {
			return dst, ErrNoKey
		}
		return admission.AppendToken(dst, tok), nil
	}
}

// FuncKey returns a KeyFunc that limits by the ID f returns for a call:
// a user or tenant that an earlier interceptor authenticated and put in
// the context, for example. kind names it in the key ("user", "tenant";
// lower-case letters and digits only, and not "ip" or "tok", which
// PeerKey and MetadataKey use: otherwise every call fails with an error,
// since two key functions must never write the same identity for
// different clients). f returns ok = false when the call has no such ID
// (ErrNoKey).
//
// The ID is trimmed of surrounding white space and otherwise compared
// exactly. As with httplimit.ContextKey, an ID made only of letters,
// digits and "._@+-", up to 128 bytes, is used as is; any other is
// replaced by "~" and the hex of its SHA-256's first 128 bits, so that no
// ID can contain the key's separators.
func FuncKey(kind string, f func(ctx context.Context) (id string, ok bool)) KeyFunc {
	kindOK := admission.ValidKind(kind) && f != nil
	return func(ctx context.Context, dst []byte) ([]byte, error) {
		if !kindOK {
			return dst, errors.New("grpclimit: FuncKey: kind " + strconv.Quote(kind) + " must be lower-case letters and digits, and not \"ip\" or \"tok\", and f must not be nil")
		}
		id, ok := f(ctx)
		if !ok {
			return dst, ErrNoKey
		}
		k := admission.AppendID(dst, kind, id)
		if len(k) == len(dst)+len(kind)+1 { // "kind:": id was blank
			return dst, ErrNoKey
		}
		return k, nil
	}
}

// PeerKey returns a KeyFunc that limits by the client IP prefix: "ip:"
// and the address, with "/bits" when it is grouped ("ip:192.0.2.1",
// "ip:2001:db8:1:2::/64"), as httplimit.IPKey writes it. See
// ClientPrefix for how the address is found; it fails with httplimit.ErrNoClientIP
// when the peer is not an IP address (a Unix socket, an in-memory
// listener).
func PeerKey(c *httplimit.ClientIP) KeyFunc {
	return func(ctx context.Context, dst []byte) ([]byte, error) {
		p, err := ClientPrefix(ctx, c)
		if err != nil {
			return dst, err
		}
		return admission.AppendIP(dst, p), nil
	}
}

// ClientPrefix returns the address of the client of the call in ctx,
// grouped by c's IPv4Bits and IPv6Bits, under exactly httplimit's rules:
// it is httplimit.ClientIP.Prefix applied to the call. The connection's
// peer address (peer.FromContext) is the client, and forwarding metadata
// is ignored, unless c trusts the peer as a proxy; then the walk of
// ClientIP runs over the "x-forwarded-for" metadata entries (or
// "forwarded" with c.Header = httplimit.Forwarded), which proxies such as
// Envoy write on the gRPC requests they forward. A client that sends its
// own x-forwarded-for directly is not a trusted peer: its entry is
// ignored. nil c means the peer only, IPv6 grouped by /64.
//
// Build c with httplimit.NewClientIP, which validates it.
func ClientPrefix(ctx context.Context, c *httplimit.ClientIP) (netip.Prefix, error) {
	pr, ok := peer.FromContext(ctx)
	if !ok || pr.Addr == nil {
		return netip.Prefix{}, httplimit.ErrNoClientIP
	}
	var remote string
	switch a := pr.Addr.(type) {
	case *net.TCPAddr:
		ap := a.AddrPort()
		if !ap.Addr().IsValid() {
			return netip.Prefix{}, httplimit.ErrNoClientIP
		}
		remote = ap.String()
	default:
		remote = a.String() // ClientIP refuses what is not an IP address

	}
	// httplimit.ClientIP decides on an http.Request: hand it one holding
	// the peer and, only if it may read them, the forwarding entries.
	r := http.Request{RemoteAddr: remote}
	if c != nil && len(c.TrustedProxies) > 0 {
		mdName, hdrName := "x-forwarded-for", "X-Forwarded-For"
		if c.Header == httplimit.Forwarded {
			mdName, hdrName = "forwarded", "Forwarded"
		}
		if vs := metadata.ValueFromIncomingContext(ctx, mdName); len(vs) > 0 {
			r.Header = http.Header{hdrName: vs}
		}
	}
	return c.Prefix(&r)
}
