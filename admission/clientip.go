package admission

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ErrNoClientIP is returned by ClientIP.Prefix, and by
// the transports' client-IP key functions, when the request's peer is not
// an IP address, as on a Unix socket, an in-memory listener or a
// hand-built request.
var ErrNoClientIP = errors.New("admission: request has no client IP address")

// The forwarding headers a ClientIP reads (ClientIP.Header), as HTTP
// spells them.
const (
	xForwardedFor = "X-Forwarded-For"
	forwarded     = "Forwarded" // RFC 7239
)

// ClientIP finds the address a request came from, in a form that cannot
// be spoofed by the client, and groups it into the prefix a limit is
// keyed by. It decides from the connection's peer address and, behind a
// trusted proxy, from the forwarding header (HTTP) or metadata entry
// (gRPC) the proxy wrote, so that httplimit and grpclimit find the same
// client under the same rules.
//
// With no trusted proxies (the zero ClientIP), the address is the
// connection's peer and forwarding headers are ignored: any
// client can write them. With trusted proxies, and only when the peer is
// one of them, it walks the configured header from the right (across
// every header line, the last line last) past the trusted proxies and
// takes the first address that is not one: that hop was written by a
// proxy we trust, the ones to its left by whoever the client is. If a hop
// cannot be parsed (garbage, "unknown", an obfuscated RFC 7239 node such
// as "_hidden"), the walk stops and the last trusted hop is the client:
// a malformed header only ever puts its sender in the proxy's bucket, it
// never picks a key of its choosing. If every hop is trusted, the leftmost
// is the client.
//
// Addresses are normalised before grouping: IPv4-mapped IPv6 addresses
// (::ffff:192.0.2.1) become IPv4, and IPv6 zones are stripped. IPv6
// clients are grouped by IPv6Bits (default 64: one customer's site
// usually holds a whole /64, and can rotate addresses within it at will),
// IPv4 clients by IPv4Bits (default 32).
//
// A ClientIP must not be modified after first use; it is then safe for
// concurrent use. Build one with NewClientIP to have its fields checked.
type ClientIP struct {
	// TrustedProxies are the ranges of proxies whose forwarding header is
	// believed. Empty: only the peer address counts.
	TrustedProxies []netip.Prefix
	// Header names the forwarding header read behind trusted proxies,
	// in any letter case: "X-Forwarded-For" (or "", the default) or
	// "Forwarded" (its RFC 7239 "for" parameters). Validate refuses any
	// other name.
	Header string
	// IPv6Bits is the prefix length IPv6 clients are grouped by, in
	// [1, 128]; 0 means 64.
	IPv6Bits int
	// IPv4Bits is the prefix length IPv4 clients are grouped by, in
	// [1, 32]; 0 means 32.
	IPv4Bits int
}

// NewClientIP returns a ClientIP trusting the given proxy ranges, each a
// CIDR ("10.0.0.0/8", "2001:db8::/32") or a single address, that reads
// the forwarding header named header ("X-Forwarded-For", "" for it, or
// "Forwarded"; see ClientIP.Header). It returns an error naming the entry
// that does not parse, a header it does not read, or a prefix length out
// of range.
func NewClientIP(trusted []string, header string, ipv6Bits, ipv4Bits int) (*ClientIP, error) {
	c := &ClientIP{Header: header, IPv6Bits: ipv6Bits, IPv4Bits: ipv4Bits}
	for _, s := range trusted {
		s = strings.TrimSpace(s)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("admission: trusted proxy %q: not a CIDR or an address", s)
			}
			a = a.Unmap().WithZone("")
			p = netip.PrefixFrom(a, a.BitLen())
		}
		c.TrustedProxies = append(c.TrustedProxies, p)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	return c, nil
}

// Validate checks c's fields, as NewClientIP does, and normalises its
// TrustedProxies in place (IPv4-mapped ranges become IPv4, zones are
// stripped, host bits are cleared), writing only what changes: a
// ClientIP NewClientIP built may be validated again while in use. The
// transports' New call it on the ClientIP of their Config. The error
// names the field ("ClientIP.IPv6Bits must be ..."), with no package
// prefix: the caller adds its own.
func (c *ClientIP) Validate() error {
	if c.IPv6Bits < 0 || c.IPv6Bits > 128 {
		return fmt.Errorf("ClientIP.IPv6Bits must be in [0, 128], got %d", c.IPv6Bits)
	}
	if c.IPv4Bits < 0 || c.IPv4Bits > 32 {
		return fmt.Errorf("ClientIP.IPv4Bits must be in [0, 32], got %d", c.IPv4Bits)
	}
	if c.Header != "" && !strings.EqualFold(c.Header, xForwardedFor) && !strings.EqualFold(c.Header, forwarded) {
		return fmt.Errorf("ClientIP.Header %q is not %q or %q", c.Header, xForwardedFor, forwarded)
	}
	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			return fmt.Errorf("ClientIP.TrustedProxies[%d] is not a valid prefix", i)
		}
		a, bits := p.Addr().WithZone(""), p.Bits()
		if a.Is4In6() && bits >= 96 {
			a, bits = a.Unmap(), bits-96 // ::ffff:10.0.0.0/104 is 10.0.0.0/8
		}
		// Write only what changes: New validates a ClientIP that may
		// already be in use (NewClientIP's output is normalised), and a
		// write, even of the same value, would race with its readers.
		if q := netip.PrefixFrom(a, bits).Masked(); q != p {
			c.TrustedProxies[i] = q
		}
	}
	return nil
}

// addr returns the address of the client of a request whose
// connection's peer is peer (normalised, not yet grouped), and
// ErrNoClientIP when peer holds no address.
func (c *ClientIP) addr(peer netip.AddrPort, header func(name string) []string) (netip.Addr, error) {
	a, ok := normalize(peer.Addr())
	if !ok {
		return netip.Addr{}, ErrNoClientIP
	}
	if c == nil || len(c.TrustedProxies) == 0 || !c.trusted(a) {
		return a, nil
	}
	name, parse := xForwardedFor, parseNode
	if strings.EqualFold(c.Header, forwarded) {
		name, parse = forwarded, parseForwardedHop
	}
	return c.walk(a, header(name), parse), nil
}

// walk returns the client's address behind the trusted peer, from the
// lines of its forwarding header, each hop parsed by parse.
func (c *ClientIP) walk(peer netip.Addr, lines []string, parse func(string) (netip.Addr, bool)) netip.Addr {
	last := peer
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		for end := len(line); end >= 0; {
			start := elementStart(line, end)
			elem := strings.TrimSpace(line[start:end])
			end = start - 1 // before the comma
			if elem == "" {
				continue // "a, , b": an empty element says nothing
			}
			a, ok := parse(elem)
			if !ok {
				return last // malformed: the last trusted hop is the client
			}
			if !c.trusted(a) {
				return a
			}
			last = a
		}
	}
	return last
}

// Prefix returns the address of the client of a request whose
// connection's peer is peer, normalised and grouped by IPv6Bits or
// IPv4Bits (with IPv6Bits 128 and IPv4Bits 32, the address itself), and
// ErrNoClientIP when peer holds no address. header returns the lines of
// a forwarding header of the request, in the order received, by its
// name as HTTP spells it ("X-Forwarded-For" or "Forwarded"; gRPC
// metadata holds them in lower case); it is called only when peer is a
// trusted proxy, and may be nil when c trusts none. A nil c takes the
// peer only, IPv6 grouped by /64.
func (c *ClientIP) Prefix(peer netip.AddrPort, header func(name string) []string) (netip.Prefix, error) {
	a, err := c.addr(peer, header)
	if err != nil {
		return netip.Prefix{}, err
	}
	return c.group(a), nil
}

func (c *ClientIP) group(a netip.Addr) netip.Prefix {
	bits := 32
	if a.Is6() {
		bits = 64
		if c != nil && c.IPv6Bits != 0 {
			bits = c.IPv6Bits
		}
	} else if c != nil && c.IPv4Bits != 0 {
		bits = c.IPv4Bits
	}
	p, err := a.Prefix(bits)
	if err != nil {
		// An unvalidated ClientIP with a prefix length out of range:
		// group nothing rather than everything.
		p = netip.PrefixFrom(a, a.BitLen())
	}
	return p
}

func (c *ClientIP) trusted(a netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// elementStart returns where the comma-separated element of line that
// ends at end begins, scanning right to left and skipping commas inside
// quoted strings (RFC 7230 quoted-string, with backslash escapes).
func elementStart(line string, end int) int {
	inQuote := false
	for i := end - 1; i >= 0; i-- {
		switch line[i] {
		case '"':
			// A quote preceded by an odd number of backslashes is escaped.
			n := 0
			for j := i - 1; j >= 0 && line[j] == '\\'; j-- {
				n++
			}
			if n%2 == 0 {
				inQuote = !inQuote
			}
		case ',':
			if !inQuote {
				return i + 1
			}
		}
	}
	return 0
}

func normalize(a netip.Addr) (netip.Addr, bool) {
	if !a.IsValid() {
		return a, false
	}
	return a.Unmap().WithZone(""), true
}

// parseNode parses an address in the forms proxies write: "192.0.2.1",
// "192.0.2.1:80", "2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:80",
// with an optional IPv6 zone.
func parseNode(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a)
	}
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		rest := s[end+1:]
		if rest != "" && !validPort(rest) {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		return normalize(a)
	}
	if host, port, ok := strings.Cut(s, ":"); ok && validPort(":"+port) {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is4() {
			return netip.Addr{}, false
		}
		return normalize(a)
	}
	return netip.Addr{}, false
}

// validPort reports whether s is ":" followed by a decimal port. RFC 7239
// also allows an obfuscated port ("_abc"); accept it, the port is unused.
func validPort(s string) bool {
	if len(s) < 2 || s[0] != ':' {
		return false
	}
	s = s[1:]
	if s[0] == '_' {
		for i := 1; i < len(s); i++ {
			if !isTokenChar(s[i]) {
				return false
			}
		}
		return true
	}
	n, err := strconv.ParseUint(s, 10, 16)
	return err == nil && len(s) <= 5 && n <= 65535
}

func isTokenChar(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-'
}

// parseForwardedHop parses one RFC 7239 forwarded-element
// ("for=192.0.2.1;proto=https;by=...") and returns its "for" node. An
// element without "for", an "unknown" or obfuscated node, or a malformed
// value is not an address.
func parseForwardedHop(elem string) (netip.Addr, bool) {
	for len(elem) > 0 {
		var pair string
		pair, elem = cutPair(elem)
		name, value, ok := strings.Cut(pair, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "for") {
			continue
		}
		value = strings.TrimSpace(value)
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
			if strings.IndexByte(value, '\\') >= 0 {
				value = unescapeQuoted(value)
			}
		} else if strings.ContainsAny(value, "\"[]") {
			return netip.Addr{}, false // IPv6 and ports must be quoted
		}
		return parseNode(value)
	}
	return netip.Addr{}, false
}

// cutPair returns the first ';'-separated pair of elem (quotes respected)
// and the rest.
func cutPair(elem string) (pair, rest string) {
	inQuote := false
	for i := 0; i < len(elem); i++ {
		switch elem[i] {
		case '\\':
			if inQuote {
				i++
			}
		case '"':
			inQuote = !inQuote
		case ';':
			if !inQuote {
				return elem[:i], elem[i+1:]
			}
		}
	}
	return elem, ""
}

func unescapeQuoted(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
