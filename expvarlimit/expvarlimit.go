// Package expvarlimit publishes a hotlimit.Limiter's Stats through the
// standard library's expvar, so they appear at /debug/vars:
//
//	if err := expvarlimit.Publish("api_limiter", lim); err != nil { // lim is a *hotlimit.Limiter
//		log.Fatal(err)
//	}
//	http.ListenAndServe(addr, nil) // GET /debug/vars: "api_limiter": {"Allowed": 2, "Denied": 1, …}
//
// It is a separate package because importing expvar registers a handler on
// http.DefaultServeMux; the core package stays free of that side effect.
package expvarlimit

import (
	"errors"
	"expvar"
	"fmt"
	"sync"

	"github.com/hotlimit/hotlimit"
)

var mu sync.Mutex // serialises Get+Publish: expvar.Publish panics on a reused name

// Publish exports l's Stats under name as a JSON object with the fields
// Allowed, Denied, Keys, Swept, Evicted and Refunded, and Bytes, the heap
// bytes l holds (l.MemStats().Total), read when /debug/vars is served.
// Every field but Keys and Bytes is a counter that never decreases; an
// admission given back later stays in Allowed and adds one to Refunded
// (see hotlimit.Stats). It returns an error, instead of expvar's panic, if
// name is empty or already published, or l is nil.
func Publish(name string, l *hotlimit.Limiter) error {
	if l == nil {
		return errors.New("expvarlimit: nil Limiter")
	}
	if name == "" {
		return errors.New("expvarlimit: empty name")
	}
	mu.Lock()
	defer mu.Unlock()
	if expvar.Get(name) != nil {
		return fmt.Errorf("expvarlimit: %q is already published", name)
	}
	expvar.Publish(name, expvar.Func(func() any { return published{l.Stats(), l.MemStats().Total} }))
	return nil
}

// published is what Publish serves: Stats' fields and Bytes.
type published struct {
	hotlimit.Stats
	Bytes uint64
}
