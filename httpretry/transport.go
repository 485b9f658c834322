package httpretry

import (
	"context"
	"io"
	"net/http"
	"time"
)

// Defaults for the zero fields of a Transport.
const (
	DefaultMaxRetries = 3
	DefaultBaseDelay  = 100 * time.Millisecond
	DefaultMaxDelay   = 10 * time.Second
	DefaultMaxWait    = time.Minute
)

// IdempotencyKeyHeader is the request header that marks a request as safe
// to retry, whatever its method (draft-ietf-httpapi-idempotency-key-header).
// A request with a non-empty value is retried like a GET.
const IdempotencyKeyHeader = "Idempotency-Key"

// drainLimit bounds how much of a discarded response body is read so that
// its connection can be reused. A longer body is closed unread, which
// costs the connection, not correctness.
const drainLimit = 4 << 10

// Transport is an http.RoundTripper that retries requests a server refused
// for rate limiting, waiting as long as the server asked and at least a
// capped exponential backoff with full jitter.
//
// RoundTrip sends the request through Base. When the response is 429 Too
// Many Requests, or 503 Service Unavailable with a well-formed Retry-After,
// and the request is retryable, it waits
//
//	max(ask, uniform[0, min(MaxDelay, BaseDelay·2^n)])
//
// before retry n+1 (n = 0, 1, ...), where ask is the server's requested
// wait as read by ServerWait (Retry-After, RateLimit, X-RateLimit-Reset; 0
// when none is present or they are malformed). So a retry never comes
// sooner than the server asked. Other statuses are returned as they are.
//
// A request is retryable when its method is GET, HEAD, OPTIONS, TRACE, PUT
// or DELETE, or when the caller marked it: with a context from
// MarkIdempotent, or with a non-empty Idempotency-Key header. A POST or
// PATCH without a mark is never retried. A request with a body is
// retryable only if it has GetBody (http.NewRequest sets it for bytes,
// strings and bytes.Buffer readers); each retry sends a fresh body from it.
//
// RoundTrip does not wait, and returns the last response instead, with its
// body unread, when: retries are exhausted (MaxRetries), the wait would
// reach the request context's deadline, or the wait is longer than MaxWait.
// An http.Client's Timeout is such a deadline: the Client sets it on the
// request's context. When the request's context ends during a wait,
// RoundTrip returns promptly with the context's error; the response it was
// waiting after is already closed. A discarded response's body is read (up to 4 KiB, so the
// connection can be reused) and closed.
//
// Host gate: when a 429 or 503 asks for a wait, the Transport records that
// its host (scheme, host and port) must not be called before then, and
// every request through this Transport to that host, retryable or not,
// first waits until then, plus a jitter of up to BaseDelay so that the
// waiting requests do not all arrive at once (cut short where the
// deadline or MaxWait leaves less room). If the gate opens further away
// than the request's deadline or MaxWait, RoundTrip returns an error
// wrapping ErrThrottled without sending anything. A gate stays closed
// for at most MaxWait: a longer ask (a server's mistake, or a Unix time in
// milliseconds read as seconds) would otherwise shut the host out for the
// Transport's lifetime; after MaxWait the next request is sent, and the
// server's answer sets the gate again. (The request that got the long ask
// is not retried sooner than asked: it returns the response.) A Transport keeps the
// gates of at most 1024 hosts at a time, dropping the one that opens first
// when full. The gate is per Transport and per host; a client that uses several credentials against
// one host, limited separately, should use one Transport for each or set
// DisableHostGate.
//
// The zero value is ready to use, with the defaults documented on each
// field. A Transport is safe for concurrent use by multiple goroutines and
// must not be copied after first use; its fields must not be changed while
// requests are in flight.
type Transport struct {
	// Base sends each attempt. Nil means http.DefaultTransport.
	Base http.RoundTripper

	// MaxRetries is the number of retries after the first attempt.
	// 0 means DefaultMaxRetries (3); a negative value disables retries
	// (the host gate still applies).
	MaxRetries int

	// BaseDelay is the backoff's cap before the first retry; it doubles
	// for each later retry. Zero or negative means DefaultBaseDelay.
	BaseDelay time.Duration

	// MaxDelay caps the backoff (not the server's ask). Zero or negative
	// means DefaultMaxDelay. A MaxDelay below BaseDelay caps every backoff
	// at MaxDelay.
	MaxDelay time.Duration

	// MaxWait is the longest the Transport waits before one attempt. A
	// server asking for more gets its response returned instead: the
	// Transport never waits less than asked, so it does not retry.
	// Zero or negative means DefaultMaxWait (1 minute).
	MaxWait time.Duration

	// RetryTransportErrors makes retryable requests retry, with backoff
	// only, when Base returns an error (a refused or reset connection),
	// unless the request's context has ended. By default transport
	// errors are returned at once.
	RetryTransportErrors bool

	// DisableHostGate turns the host gate off: requests wait only for
	// their own retries.
	DisableHostGate bool

	// Test hooks; nil means the real clock, a context-aware timer, and
	// math/rand/v2. randN returns a uniform value in [0, n).
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	randN func(n int64) int64

	gates hostGates
}

// markKey is the context key of MarkIdempotent.
type markKey struct{}

// MarkIdempotent returns a copy of ctx that marks requests made with it
// as safe to retry whatever their method, for example a POST the server
// deduplicates.
func MarkIdempotent(ctx context.Context) context.Context {
	return context.WithValue(ctx, markKey{}, true)
}

// isMarked reports whether ctx was derived from MarkIdempotent.
func isMarked(ctx context.Context) bool {
	v, _ := ctx.Value(markKey{}).(bool)
	return v
}

// retryable reports whether req may be sent more than once.
func retryable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return req.Header.Get(IdempotencyKeyHeader) != "" || isMarked(req.Context())
}

// RoundTrip implements http.RoundTripper. See Transport for the retry
// policy. As the interface requires, it does not modify req and always
// closes req.Body.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	retries := t.retries(req)
	host := "" // the gate's key, built only when a gate is in play
	r := req
	for attempt := 0; ; attempt++ {
		if !t.DisableHostGate && t.gates.used.Load() {
			if host == "" {
				host = gateKey(req)
			}
			if err := t.waitGate(ctx, host); err != nil {
				closeBody(r)
				return nil, err
			}
		}
		resp, err := base.RoundTrip(r)
		if err == nil && !throttleStatus(resp.StatusCode) {
			return resp, nil // the common case: no clock read, no allocation
		}
		if host == "" {
			host = gateKey(req)
		}
		now := t.clock()
		wait, retry := t.retryWait(ctx, resp, err, now, host, attempt, retries)
		switch {
		case !retry && err != nil:
			return nil, err
		case !retry:
			return resp, nil
		case !t.fits(ctx, now, wait):
			return resp, err
		}
		next, berr := rewind(req)
		if berr != nil {
			return resp, err
		}
		discard(resp)
		if serr := t.wait(ctx, wait); serr != nil {
			closeBody(next)
			return nil, serr
		}
		r = next
	}
}

// retries returns how many times req may be retried: none when it is not
// retryable or MaxRetries is negative, DefaultMaxRetries when MaxRetries
// is 0.
func (t *Transport) retries(req *http.Request) int {
	switch {
	case t.MaxRetries < 0 || !retryable(req):
		return 0
	case t.MaxRetries == 0:
		return DefaultMaxRetries
	}
	return t.MaxRetries
}

// retryWait decides on attempt (0 for the first) of a request that may
// be retried retries times, which failed at now with a transport error
// err or with a response resp that may be a refusal: it reports whether
// to retry, and how long to wait first, at least what the host gate of
// host still holds. A refusal that asks for a wait closes the host gate
// for that long (at most MaxWait), retried or not.
func (t *Transport) retryWait(ctx context.Context, resp *http.Response, err error, now time.Time, host string, attempt, retries int) (time.Duration, bool) {
	canRetry := attempt < retries
	var wait time.Duration
	if err != nil {
		if !canRetry || !t.RetryTransportErrors || ctx.Err() != nil {
			return 0, false
		}
		wait = t.backoff(attempt)
	} else {
		ask, throttled := throttle(resp, now)
		if !throttled {
			return 0, false
		}
		if ask > 0 && !t.DisableHostGate {
			t.gates.push(host, now, min(ask, t.maxWait()))
		}
		if !canRetry {
			return 0, false
		}
		wait = max(ask, t.backoff(attempt))
	}
	if !t.DisableHostGate {
		g, _ := t.gates.remainingNow(host, t.clock)
		wait = max(wait, g)
	}
	return wait, true
}

// throttleStatus reports whether code may be a refusal worth retrying.
func throttleStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
}

// throttle reports whether resp is a refusal worth retrying, and the wait
// the server asked for: 429 always, 503 only with a valid Retry-After.
func throttle(resp *http.Response, now time.Time) (time.Duration, bool) {
	if !throttleStatus(resp.StatusCode) ||
		resp.StatusCode == http.StatusServiceUnavailable && !hasRetryAfter(resp, now) {
		return 0, false
	}
	ask, _ := ServerWait(resp, now)
	return ask, true
}

// maxWait is MaxWait or its default.
func (t *Transport) maxWait() time.Duration {
	if t.MaxWait <= 0 {
		return DefaultMaxWait
	}
	return t.MaxWait
}

// fits reports whether a wait of d may start at now: no longer than
// MaxWait, and ending before the context's deadline.
func (t *Transport) fits(ctx context.Context, now time.Time, d time.Duration) bool {
	if d > t.maxWait() {
		return false
	}
	if deadline, ok := ctx.Deadline(); ok && d >= deadline.Sub(now) {
		return false
	}
	return true
}

func (t *Transport) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

// wait sleeps for d or until ctx ends, whichever comes first, and returns
// ctx.Err() in the second case.
func (t *Transport) wait(ctx context.Context, d time.Duration) error {
	if t.sleep != nil {
		return t.sleep(ctx, d)
	}
	return sleepContext(ctx, d)
}

// sleepContext is the real sleep behind wait.
func sleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// rewind returns a copy of req for the next attempt, with a fresh body
// from GetBody when it has one.
func rewind(req *http.Request) (*http.Request, error) {
	next := req.Clone(req.Context())
	if req.Body == nil || req.Body == http.NoBody {
		return next, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	next.Body = body
	return next, nil
}

// discard reads up to drainLimit bytes of resp's body and closes it. It
// accepts a nil resp.
func discard(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	_ = resp.Body.Close()
}

// closeBody closes a request body that will not be sent.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
