package otellimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
)

// scope names the meter and the tracer.
const scope = "github.com/hotlimit/hotlimit/otellimit"

// The attribute keys. See the package documentation for what each holds.
const (
	keyLimit         = attribute.Key("hotlimit.limit")
	keyDecision      = attribute.Key("hotlimit.decision")
	keyGroup         = attribute.Key("hotlimit.route_group")
	keyMethodGroup   = attribute.Key("hotlimit.method_group")
	keyOutcome       = attribute.Key("hotlimit.outcome")
	keyAlgorithm     = attribute.Key("hotlimit.algorithm")
	keyKind          = attribute.Key("hotlimit.identity.kind")
	keyTenant        = attribute.Key("hotlimit.tenant")
	keyResult        = attribute.Key("hotlimit.backend.result")
	keyLayers        = attribute.Key("hotlimit.layers")
	keyRemaining     = attribute.Key("hotlimit.remaining")
	keyRetryAfter    = attribute.Key("hotlimit.retry_after")
	keyErrorType     = attribute.Key("error.type")
	otherValue       = "_OTHER" // a value outside a bounded set, as the conventions spell it
	defaultMaxKinds  = 16
	defaultMaxGroups = 256
)

// eventAlgorithm maps admission.Event.Algorithm to the attribute value.
func eventAlgorithm(s string) string {
	switch s {
	case "":
		return ""
	case "TokenBucket":
		return "token_bucket"
	case "LeakyBucket":
		return "leaky_bucket"
	case "FixedWindow":
		return "fixed_window"
	case "SlidingWindow":
		return "sliding_window"
	case "SlidingLog":
		return "sliding_log"
	}
	return otherValue
}

// errorType classifies a backend error for error.type: a fixed set.
func errorType(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return otherValue
}

// boundedSet admits at most max distinct values and maps any other to
// "_OTHER", so that an attribute fed from a value the configuration does
// not fix (an identity kind read from a key) cannot grow without bound.
// It is safe for concurrent use; a value already admitted costs one
// lock-free map read.
type boundedSet struct {
	max   int
	valid func(string) bool                 // the values it may admit
	mu    sync.Mutex                        // serialises admissions
	seen  atomic.Pointer[map[string]string] // copy on write; values are interned copies
}

func newBoundedSet(max int) *boundedSet { return newBoundedSetOf(max, validKind) }

// newBoundedSetOf is newBoundedSet admitting the values valid accepts.
func newBoundedSetOf(max int, valid func(string) bool) *boundedSet {
	b := &boundedSet{max: max, valid: valid}
	m := map[string]string{}
	b.seen.Store(&m)
	return b
}

// value returns v if it is admitted (admitting it if there is room), or
// "_OTHER". The returned string never aliases v's memory.
func (b *boundedSet) value(v string) string {
	if s, ok := (*b.seen.Load())[v]; ok {
		return s
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	old := *b.seen.Load()
	if s, ok := old[v]; ok {
		return s
	}
	if len(old) >= b.max || !b.valid(v) {
		return otherValue
	}
	m := make(map[string]string, len(old)+1)
	for k, s := range old {
		m[k] = s
	}
	s := string([]byte(v)) // own copy: v may be a view of a key
	m[s] = s
	b.seen.Store(&m)
	return s
}

// validKind reports whether v can be an identity kind: 1 to 32 bytes of
// letters, digits, '.', '_' and '-'.
// Group names, up to 64 bytes, are checked with validName.
func validKind(v string) bool {
	if len(v) == 0 || len(v) > 32 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}
