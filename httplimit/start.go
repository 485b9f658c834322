package httplimit

import (
	"github.com/hotlimit/hotlimit"
)

// ByIP returns a Middleware for the common case: each client IP may send
// rate.N requests per rate.Per, counted by a sliding window
// (hotlimit.SlidingWindow{Limit: rate.N, Window: rate.Per}), on every
// route alike, with the default headers and responses. It is shorthand
// for New with a Config of one limit named "per-ip", one group named
// "all", and Key IPKey(nil).
//
// The client IP is the connection's peer address: behind a reverse proxy
// every client would share the proxy's quota. There, build a ClientIP
// with the proxy's address (NewClientIP) and use New with IPKey. The
// error is New's, for a rate a sliding window cannot hold (rate.N below
// 1 or above 2,097,151, rate.Per not positive).
//
//	mw, err := httplimit.ByIP(hotlimit.PerMinute(100))
//	...
//	http.ListenAndServe(addr, mw.Handler(mux))
func ByIP(rate hotlimit.Rate) (*Middleware, error) {
	return oneLimit("per-ip", rate, IPKey(nil), KeyErrorDeny)
}

// ByToken is ByIP keyed by the API token a request presents in the named
// header (see TokenKey: the Bearer credential for "Authorization"), in a
// limit named "per-token". A request without a token is limited by its
// client IP instead (KeyErrorFallbackIP), under the same rate.
//
// An invalid header name (empty, or not an HTTP token) is an error: no
// request could carry it, and every request would quietly fall back to
// its IP. As with TokenKey, the token is not checked: authenticate before
// the middleware, or a client can mint a fresh quota with every made-up
// token.
func ByToken(header string, rate hotlimit.Rate) (*Middleware, error) {
	if err := checkHeaderName(header); err != nil {
		return nil, err // TokenKey would find no token, and every request would fall back to its IP
	}
	return oneLimit("per-token", rate, TokenKey(header), KeyErrorFallbackIP)
}

func oneLimit(name string, rate hotlimit.Rate, key KeyFunc, onKeyError KeyErrorMode) (*Middleware, error) {
	return New(Config{
		Limits:       map[string]hotlimit.Policy{name: hotlimit.SlidingWindow{Limit: rate.N, Window: rate.Per}},
		Groups:       []Group{{Name: "all", Limit: name}},
		DefaultGroup: "all",
		Key:          key,
		OnKeyError:   onKeyError,
	})
}
