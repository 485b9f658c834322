package admission

import (
	"encoding/binary"
	"strings"

	"github.com/hotlimit/hotlimit/internal/ident"
)

// An identity is a short kind, a colon, and a value that cannot contain
// ":route:": "tok:9f86d081884c7d659a2feaa0c55ad015", "ip:192.0.2.1",
// "tenant:acme". The transports' key functions write "tok:" and "ip:"
// alike, so that one client limited over HTTP and over gRPC through one
// backend gets the same keys; httplimit.ContextKey and grpclimit.FuncKey
// write an application's own kind.

// TokenIdentity returns the identity of token, trimmed of surrounding
// white space, as the transports' token key functions write it:
// "tok:" and the first 128 bits of its SHA-256, in hex.
func TokenIdentity(token string) string {
	return string(ident.AppendToken(nil, strings.TrimSpace(token)))
}

// Everyone is the key function of a layer shared by every client: it
// appends the identity "all:*" whatever the request. An identity layer
// keyed by it is one budget for all clients together, a cap on what the
// server takes in (per instance with the in-process backend, across
// instances through a shared one), checked with the client's own layers,
// all or nothing:
//
//	Identities: []httplimit.IdentityLimit{{Limit: "server", Key: admission.Everyone[*http.Request]}}
//
// Config.Global, by contrast, is a layer per identity. Instantiate it for
// the transport: Everyone[*http.Request] for httplimit,
// Everyone[context.Context] for grpclimit.
func Everyone[R any](dst []byte, _ R) ([]byte, error) {
	return append(dst, everyone...), nil
}

// everyone is the identity Everyone writes: kind "all", which no
// application kind may be (httplimit.ContextKey and grpclimit.FuncKey
// refuse it), and a value no application ID is written as.
const everyone = "all:*"

// The keys a Pipeline gives a Local backend, whose limiters live in this
// process and nowhere else, are shorter than a shared store's
// (ident.LayerKey), so that the key of an IPv4 client's group layer fits
// in the 15 bytes hotlimit stores in a slot (a key that fits is compared
// and hashed in two words, not read from the slot's arena). Every other
// backend (Redis, leases, a wrapper) gets ident.LayerKey's keys: a shared
// store's keys keep their version prefix and their group's name, and
// never change with this layout. The in-process layout, of an identity I
// as a Key function wrote it:
//
//   - the identity, id(I): for "ip:" and an IPv4 address as ident.AppendIP
//     writes it (dotted decimal, no leading zero, no prefix length), the
//     byte 0x01 and the address's 4 bytes; for any other identity, the
//     byte 0x02 and the identity;
//   - a group's layer: the byte 0x03, the number the Local gives the
//     group's name as a uvarint, then id(I). The Local numbers names in
//     the order Pipelines first bring them, one number per name for every
//     Pipeline that shares it: a route group and a method group of one
//     name, through one Local, share their keys as through any backend;
//   - the global layer and an identity layer: id(I).
//
// id is one to one (its two forms start with 0x01 and 0x02, and decode
// back to I), and a group's key starts with 0x03, which no id does, and
// then a number whose uvarint ends where id begins: two distinct (group
// or none, identity) never get one key, nor do the keys of one request's
// layers that share a limit.
//
// Decide writes these keys in place: a Key function is handed dst ending
// in the group's 0x03 and number and the 0x02 of id, or in the 0x02 of an
// identity layer's id, and appends I; localize then turns an IPv4 client's
// text into its 5 bytes. A layer keyed by Config.ClientAddr (a nil Key)
// gets an IPv4 client's 5 bytes from the address itself, with no text
// (appendAddr). The group key, the global one (its id(I)) and the
// identity layers' then lie in one buffer, which the Local is handed
// views of.
const (
	tagIPv4  = 0x01 // id(I) of an IPv4 client: 4 bytes follow
	tagText  = 0x02 // id(I) of any other identity: I follows
	tagGroup = 0x03 // a group layer's key: the Local's number of its name, then id(I)
)

// appendLocalID appends id(identity), the in-process form of identity.
func appendLocalID(dst, identity []byte) []byte {
	at := len(dst)
	return localize(append(append(dst, tagText), identity...), at)
}

// localize turns id(I) at key[at:], the byte tagText and I (the rest of
// key), into its in-process form: for an IPv4 client, tagIPv4 and the
// address's 4 bytes; any other id is already in it.
func localize(key []byte, at int) []byte {
	if a, ok := parseIPv4(key[at+1:]); ok {
		key[at] = tagIPv4
		return append(key[:at+1], a[0], a[1], a[2], a[3])
	}
	return key
}

// localHead returns what precedes id(I) in the group layer's key of the
// group the backend numbers n (Local.groupNumber), in the in-process
// layout: tagGroup and n as a uvarint; then, where Decide hands a Key
// function dst, the tagText of id(I).
func localHead(n uint64) []byte {
	return binary.AppendUvarint([]byte{tagGroup}, n)
}

// parseIPv4 returns the address of an identity "ip:" + a.b.c.d exactly
// as ident.AppendIP writes an IPv4 address (each part 0 to 255, no leading
// zero), and false for any other identity, so that an identity it
// accepts is the only one with that address.
func parseIPv4(id []byte) ([4]byte, bool) {
	if len(id) < len("ip:0.0.0.0") || len(id) > len("ip:255.255.255.255") || string(id[:3]) != "ip:" {
		return [4]byte{}, false
	}
	a, n, ok := ident.IPv4(id[3:])
	return a, ok && n == len(id)-3
}
