// Package httpretry provides an http.RoundTripper for clients of
// rate-limited HTTP APIs: it retries requests the server refused with 429
// Too Many Requests (or 503 Service Unavailable with Retry-After), never
// sooner than the server asked and never more aggressively than a capped
// exponential backoff with full jitter allows, within the request's
// context deadline.
//
//	client := &http.Client{Transport: &httpretry.Transport{}}
//
// The server's requested wait is read from Retry-After (seconds or an
// HTTP-date), from the RateLimit field of draft-ietf-httpapi-ratelimit-headers
// (the reset t of a policy whose remaining r is 0), or from the de-facto
// X-RateLimit-Reset (seconds, or a Unix time); see ServerWait for the
// precedence and for how malformed values are ignored. hotlimit's httplimit
// middleware sends Retry-After and the RateLimit fields.
//
// Only requests that are safe to repeat are retried: GET, HEAD, OPTIONS,
// TRACE, PUT and DELETE, and requests the caller marks with MarkIdempotent
// or an Idempotency-Key header. A request body is replayed from
// Request.GetBody; without it the request is not retried.
//
// When the server's answer cannot be waited for (the wait would pass the
// context's deadline, or exceed Transport.MaxWait) or retries are
// exhausted, the caller gets the server's last 429 (or 503) response, body
// intact, at once. A Transport also remembers, per host, that a server asked to
// wait, and holds concurrent requests to that host back until then instead
// of letting each of them hit the server (see Transport, "Host gate").
//
// What it does not do: it does not pace requests before the server refuses
// them (a RateLimit field with r > 0 is not used to spread requests out;
// combine the client with a hotlimit.Limiter's Wait for that), it does not
// retry other 5xx statuses, and it does not follow partition keys (pk):
// the gate is per host.
package httpretry
