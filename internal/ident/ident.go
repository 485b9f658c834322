// Package ident holds what httplimit and grpclimit share in building and
// labelling keys (group and limit names, "kind:value" identities), so
// that one client limited over HTTP and over gRPC through one backend gets
// exactly the same key.
package ident

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
)

// ValidName reports whether s is a valid group or limit name: 1 to 64
// letters, digits or "._-". Such a name needs no escaping in a key or in an
// RFC 9651 String.
func ValidName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// AppendID appends id, or "~" and its hash if it is long or holds
// characters outside the plain set.
func AppendID(dst []byte, id string) []byte {
	plain := len(id) <= 128
	for i := 0; plain && i < len(id); i++ {
		plain = plainID[id[i]]
	}
	if plain {
		return append(dst, id...)
	}
	sum := sha256.Sum256([]byte(id))
	dst = append(dst, '~')
	return hex.AppendEncode(dst, sum[:16])
}

// ValidKind reports whether kind may name an application identity
// (AppendKindID): lower-case letters and digits, and not "ip", "tok" or
// "all", which the transports' IP and token keys and admission.Everyone
// write: two identities of different clients must never be equal.
func ValidKind(kind string) bool {
	if kind == "" || kind == "ip" || kind == "tok" || kind == "all" {
		return false
	}
	for i := 0; i < len(kind); i++ {
		if c := kind[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// AppendKindID appends the identity kind:id of an ID the application
// authenticated (a user, a tenant), as httplimit.ContextKey and
// grpclimit.FuncKey write it. id is trimmed of surrounding white space;
// made only of letters, digits and "._@+-", up to 128 bytes, it is used as
// is, so it reads well in logs; any other is replaced by "~" and the hex
// of its SHA-256's first 128 bits, so that no ID can contain a key's
// separators (AppendID). The caller checks kind with ValidKind.
func AppendKindID(dst []byte, kind, id string) []byte {
	dst = append(dst, kind...)
	dst = append(dst, ':')
	return AppendID(dst, strings.TrimSpace(id))
}

// plainID reports the bytes an ID used as is may hold: letters, digits
// and "._@+-". A table: the comparisons took about 20 instructions a byte
// (callgrind).
var plainID = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '@' || c == '+' || c == '-'
	}
	return t
}()

// MaxKinds bounds the identity kinds a Kinds names; a kind beyond them is
// reported as "other".
const MaxKinds = 32

// Kinds interns identity kinds ("tok", "ip", a custom kind), so that
// reporting a request's kind neither allocates nor keeps its key alive.
// The zero value is ready to use; it is safe for concurrent use and must
// not be copied after first use.
type Kinds struct {
	mu  sync.Mutex                        // serialises additions
	set atomic.Pointer[map[string]string] // copy on write
}

// Of returns the kind of identity id ("kind:value"), "" if it has none,
// and "other" once MaxKinds kinds have been seen.
func (k *Kinds) Of(id []byte) string {
	i := bytes.IndexByte(id, ':')
	if i <= 0 {
		return ""
	}
	kind := id[:i]
	if p := k.set.Load(); p != nil {
		if s, ok := (*p)[string(kind)]; ok {
			return s
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var old map[string]string
	if p := k.set.Load(); p != nil {
		old = *p
	}
	if s, ok := old[string(kind)]; ok {
		return s
	}
	if len(old) >= MaxKinds {
		return "other"
	}
	m := make(map[string]string, len(old)+1)
	for a, b := range old {
		m[a] = b
	}
	s := string(kind)
	m[s] = s
	k.set.Store(&m)
	return s
}
