package httplimit

import (
	"bytes"
	"sync"
	"sync/atomic"
)

// maxKinds bounds the identity kinds a middleware names in
// Event.IdentityKind; a kind beyond them is reported as "other".
const maxKinds = 32

// kinds interns the identity kinds ("tok", "ip", a ContextKey's kind) of
// one middleware, so that Event.IdentityKind neither allocates nor keeps
// a request's key alive. The zero value is ready to use.
type kinds struct {
	mu  sync.Mutex                        // serialises additions
	set atomic.Pointer[map[string]string] // copy on write
}

// of returns the kind of identity id ("kind:value"), "" if it has none.
func (k *kinds) of(id []byte) string {
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
	if len(old) >= maxKinds {
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
