package httplimit

import (
	"net"
	"net/http"
	"net/netip"

	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/ident"
)

// ClientPrefix returns the address of the client of r, grouped by c's
// IPv4Bits and IPv6Bits: admission.ClientIP.Prefix of the connection's
// peer (r.RemoteAddr) and, only when c trusts the peer as a proxy, of the
// X-Forwarded-For or Forwarded header lines. It returns
// admission.ErrNoClientIP when RemoteAddr is not an IP address, as on a
// Unix socket or in a hand-built request. nil c means the peer only,
// IPv6 grouped by /64. grpclimit.ClientPrefix is the same for a call.
func ClientPrefix(r *http.Request, c *admission.ClientIP) (netip.Prefix, error) {
	peer, ok := peerAddr(r.RemoteAddr)
	if !ok {
		return netip.Prefix{}, admission.ErrNoClientIP
	}
	return c.Prefix(peer, func(name string) []string { return r.Header[name] })
}

// appendClientIP appends the identity of r's client IP prefix, as
// ident.AppendIP(dst, ClientPrefix(r, c)) writes it.
func appendClientIP(c *admission.ClientIP, dst []byte, r *http.Request) ([]byte, error) {
	// The common case, an IPv4 peer ungrouped and not a trusted proxy,
	// writes RemoteAddr's host as it is: about 900 instructions less than
	// parsing it into a netip.Addr and formatting that (callgrind).
	if host, a, ok := peerIPv4(r.RemoteAddr); ok && plain4(c, a) {
		return append(append(dst, "ip:"...), host...), nil
	}
	p, err := ClientPrefix(r, c)
	if err != nil {
		return dst, err
	}
	return ident.AppendIP(dst, p), nil // no zone: ClientIP strips zones
}

// clientPrefix is ClientPrefix(r, c), with appendClientIP's fast path.
func clientPrefix(c *admission.ClientIP, r *http.Request) (netip.Prefix, error) {
	if _, a, ok := peerIPv4(r.RemoteAddr); ok && plain4(c, a) {
		return netip.PrefixFrom(netip.AddrFrom4(a), 32), nil
	}
	return ClientPrefix(r, c)
}

// peerIPv4 returns the host of a RemoteAddr of the form "a.b.c.d:port"
// written as netip.Addr.String writes an IPv4 address (four decimal
// fields, each at most 255, without leading zeros), with a port of 1 to 5
// digits, and that address; ok is false for every other form, which
// peerAddr parses. For the forms it accepts, peerAddr gives the same
// address, and AppendIP writes host: appendClientIP's fast path relies on
// it.
func peerIPv4(s string) (host string, a [4]byte, ok bool) {
	a, n, ok := ident.IPv4(s)
	if !ok || n >= len(s) || s[n] != ':' {
		return "", a, false
	}
	port := s[n+1:]
	return s[:n], a, len(port) >= 1 && len(port) <= 5 && allDigits(port)
}

// allDigits reports whether s holds decimal digits only.
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// plain4 reports whether c takes the IPv4 peer a as the client's address
// and groups it as itself (by 32 bits): a is not a trusted proxy, and
// IPv4Bits is 0, 32, or out of range (which ClientIP.Prefix treats as
// 32).
func plain4(c *admission.ClientIP, a [4]byte) bool {
	if c == nil {
		return true
	}
	if c.IPv4Bits > 0 && c.IPv4Bits < 32 {
		return false
	}
	for _, p := range c.TrustedProxies {
		if p.Contains(netip.AddrFrom4(a)) {
			return false
		}
	}
	return true
}

// peerAddr parses RemoteAddr ("ip:port", "[ip%zone]:port", or a bare ip,
// then port 0).
func peerAddr(s string) (netip.AddrPort, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 0), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return netip.AddrPortFrom(a, 0), true
		}
	}
	return netip.AddrPort{}, false
}
