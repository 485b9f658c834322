package admission

// KeyErrorMode is what a transport does when its key function cannot
// extract a key from a request.
type KeyErrorMode uint8

const (
	// KeyErrorDeny refuses the request (OutcomeKeyDenied): it can never
	// pass as it is. It is the default.
	KeyErrorDeny KeyErrorMode = iota
	// KeyErrorFallback limits the request by its client address instead
	// (the transport's Config.ClientIP), under the same layers. If even
	// that fails, the request is refused as with KeyErrorDeny.
	KeyErrorFallback
)

// FailMode is what a Pipeline does when its Backend cannot decide (Allow
// returns an error: a shared store down, a timeout).
type FailMode uint8

const (
	// FailClosed refuses the request (OutcomeErrorDenied), without
	// rate-limit fields or metadata. It is the default: the limit
	// protects something, and when it cannot be checked the safe answer
	// is not to do the work. The transports answer it as unavailability
	// (HTTP 503, gRPC Unavailable), not as a quota used up: the client
	// did nothing wrong and has no quota to wait for.
	FailClosed FailMode = iota
	// FailOpen lets the request through (OutcomeErrorAllowed), without
	// rate-limit fields or metadata.
	FailOpen
)
