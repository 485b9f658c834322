package httplimit

import (
	"fmt"
	"net/http"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// ByIP returns a Middleware for the common case: each client IP may send
// rate.N requests per rate.Per, counted by a sliding window
// (hotlimit.SlidingWindow{Limit: rate.N, Window: rate.Per}), on every
// route alike, with the default headers and responses. It is shorthand
// for By(PerIP(rate)): New with a Config of one limit named "per-ip", one
// group named "all", and a nil Key (the client IP, as IPKey(nil) keys
// it, taken by the pipeline itself).
//
// The client IP is the connection's peer address: behind a reverse proxy
// every client would share the proxy's quota. There, write By's Config
// out (see By) with Config.ClientIP naming the proxy. The
// error is New's, for a rate a sliding window cannot hold (rate.N below
// 1 or above 2,097,151, rate.Per not positive).
//
//	mw, err := httplimit.ByIP(hotlimit.PerMinute(100))
//	...
//	http.ListenAndServe(addr, mw.Handler(mux))
func ByIP(rate hotlimit.Rate) (*Middleware, error) { return By(PerIP(rate)) }

// ByToken is ByIP keyed by the API token a request presents in the named
// header (see TokenKey: the Bearer credential for "Authorization"), in a
// limit named "per-token". A request without a token is limited by its
// client IP instead (Config.FallbackToIP), under the same rate. It is
// shorthand for By(PerToken(header, rate)).
//
// An invalid header name (empty, or not an HTTP token) is an error: no
// request could carry it, and every request would quietly fall back to
// its IP. As with TokenKey, the token is not checked: authenticate before
// the middleware, or a client can mint a fresh quota with every made-up
// token.
func ByToken(header string, rate hotlimit.Rate) (*Middleware, error) {
	return By(PerToken(header, rate))
}

// PerIdentityLimit is one limit of By: a name, the identity it limits
// by, and a rate counted by a sliding window. PerIP and PerToken make
// them.
type PerIdentityLimit struct {
	name         string
	key          admission.KeyFunc[*http.Request] // nil: the client IP (Config.Key's nil)
	fallbackToIP bool
	rate         hotlimit.Rate
	err          error
}

// PerIP is the limit of ByIP: rate per client IP (the peer address), in
// a limit named "per-ip".
func PerIP(rate hotlimit.Rate) PerIdentityLimit {
	return PerIdentityLimit{name: "per-ip", rate: rate}
}

// PerToken is the limit of ByToken: rate per API token in the named
// header, in a limit named "per-token"; a request without a token is
// limited by its client IP under it.
func PerToken(header string, rate hotlimit.Rate) PerIdentityLimit {
	return PerIdentityLimit{name: "per-token", key: TokenKey(header), fallbackToIP: true, rate: rate,
		err: checkHeaderName(header)} // TokenKey would find no token, and every request would fall back to its IP
}

// By returns a Middleware that limits every request by each of limits at
// once, all or nothing: By(PerIP(hotlimit.PerMinute(100)),
// PerToken("Authorization", hotlimit.PerMinute(1000))) admits a request
// only when both its IP and its token have quota left, and a request
// refused by one consumes nothing in the other. Every limited response
// carries one RateLimit item per limit. It is shorthand for New with one
// group named "all" limited by the first limit and Config.Identities
// holding the others; grow into New when routes need groups of their own.
// The limits must have distinct names (two PerIP, say, are an error).
//
// By takes no options. Its Config equivalent, for one that needs them
// (trusted proxies, a clock, the header mode), is
//
//	httplimit.New(httplimit.Config{
//		Limits:       map[string]hotlimit.Policy{"per-ip": hotlimit.SlidingWindow{Limit: rate.N, Window: rate.Per}},
//		Groups:       []httplimit.Group{{Name: "all", Limit: "per-ip"}},
//		DefaultGroup: "all",
//		ClientIP:     proxy, // admission.NewClientIP(trusted, ...); Key nil: the IP it finds
//		Headers:      httplimit.HeadersBoth,
//		Backend:      admission.LocalBackend(hotlimit.WithClock(clock)),
//	})
//
// with, for PerToken(header, rate), a limit "per-token" in place of
// "per-ip", Key TokenKey(header) and FallbackToIP true; each
// further limit is an IdentityLimit of Config.Identities.
func By(limits ...PerIdentityLimit) (*Middleware, error) {
	if len(limits) == 0 {
		return nil, fmt.Errorf("httplimit: By needs at least one limit")
	}
	cfg := Config{
		Limits:       make(map[string]hotlimit.Policy, len(limits)),
		Groups:       []Group{{Name: "all", Limit: limits[0].name}},
		DefaultGroup: "all",
		Key:          limits[0].key,
		FallbackToIP: limits[0].fallbackToIP,
	}
	for i, l := range limits {
		if l.err != nil {
			return nil, l.err
		}
		if l.name == "" {
			return nil, fmt.Errorf("httplimit: By: limit %d is the zero PerIdentityLimit (use PerIP or PerToken)", i)
		}
		if _, dup := cfg.Limits[l.name]; dup {
			return nil, fmt.Errorf("httplimit: By: two limits named %q", l.name)
		}
		cfg.Limits[l.name] = hotlimit.SlidingWindow{Limit: l.rate.N, Window: l.rate.Per}
		if i > 0 {
			cfg.Identities = append(cfg.Identities, IdentityLimit{Limit: l.name, Key: l.key, FallbackToIP: l.fallbackToIP})
		}
	}
	return New(cfg)
}
