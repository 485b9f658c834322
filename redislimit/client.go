package redislimit

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/redis/go-redis/v9"
)

// checkClient rejects the go-redis clients configured to retry commands or
// to ignore context deadlines.
func checkClient(client redis.Scripter) error {
	var retries int
	var ctxTimeouts bool
	switch c := client.(type) {
	case nil:
		return errors.New("redislimit: nil client")
	case *redis.Client:
		o := c.Options()
		retries, ctxTimeouts = o.MaxRetries, o.ContextTimeoutEnabled
	case *redis.ClusterClient:
		o := c.Options()
		retries, ctxTimeouts = o.MaxRetries, o.ContextTimeoutEnabled
		// Its own loop sends a command again after a broken connection
		// or a timeout (same node, then another), up to MaxRedirects
		// times, whatever MaxRetries says.
		if o.MaxRedirects > 0 {
			return fmt.Errorf("redislimit: the cluster client resends failed commands (MaxRedirects %d), which could consume quota twice: set MaxRedirects: -1", o.MaxRedirects)
		}
	case *redis.Ring:
		o := c.Options()
		retries, ctxTimeouts = o.MaxRetries, o.ContextTimeoutEnabled
	default:
		// Layered calls compare clients: the type must be comparable.
		if !reflect.TypeOf(client).Comparable() {
			return fmt.Errorf("redislimit: client type %T is not comparable; pass a pointer", client)
		}
		return nil // retries and deadlines: the caller's responsibility, as documented
	}
	if retries > 0 {
		return fmt.Errorf("redislimit: the client retries failed commands (MaxRetries %d), which could consume quota twice: set MaxRetries: -1", retries)
	}
	if !ctxTimeouts {
		return errors.New("redislimit: the client ignores context deadlines, so WithTimeout could not hold: set ContextTimeoutEnabled: true")
	}
	return nil
}
