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
