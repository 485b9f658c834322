package hotlimit

import (
	"errors"
	"fmt"
	"sort"
)

// Classes limits keys under one policy per class of key: a free and a paid
// plan, say, without a limiter per tenant. Each class has its own Limiter,
// built with the same options, and a key's state lives in its class's
// limiter: a tenant moved to another class starts on that class's state
// for it (fresh, unless it was there before), and the state it leaves
// behind is swept when idle. Each class's policy can change at runtime
// with SetPolicy.
//
// The set of classes is fixed at NewClasses; it is safe for concurrent
// use.
type Classes struct {
	names []string
	lims  map[string]*Limiter
}

// NewClasses builds one Limiter per named class. It returns an error
// naming the class for an invalid policy, and then holds nothing.
func NewClasses(policies map[string]Policy, opts ...Option) (*Classes, error) {
	if len(policies) == 0 {
		return nil, errors.New("hotlimit: NewClasses needs at least one class")
	}
	c := &Classes{lims: make(map[string]*Limiter, len(policies))}
	for name := range policies {
		c.names = append(c.names, name)
	}
	sort.Strings(c.names) // the first error is the same on every run
	for _, name := range c.names {
		l, err := New(policies[name], opts...)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("hotlimit: class %q: %w", name, err)
		}
		c.lims[name] = l
	}
	return c, nil
}

// Class returns the limiter of a class, or nil for an unknown class.
// Resolve it once where the class is known, rather than on every request.
func (c *Classes) Class(name string) *Limiter { return c.lims[name] }

// Names returns the classes, sorted.
func (c *Classes) Names() []string { return append([]string(nil), c.names...) }

// Allow is AllowN(class, key, 1).
func (c *Classes) Allow(class, key string) Decision { return c.AllowN(class, key, 1) }

// AllowN decides a request of key in class. An unknown class is denied
// with RetryAfter = Never: a request never falls through to no limit.
func (c *Classes) AllowN(class, key string, cost int64) Decision {
	l := c.lims[class]
	if l == nil {
		return Decision{RetryAfter: Never}
	}
	return l.AllowN(key, cost)
}

// SetPolicy changes one class's policy; see Limiter.SetPolicy.
func (c *Classes) SetPolicy(class string, policy Policy) error {
	l := c.lims[class]
	if l == nil {
		return fmt.Errorf("hotlimit: unknown class %q", class)
	}
	return l.SetPolicy(policy)
}

// Close closes every class's limiter.
func (c *Classes) Close() error {
	for _, l := range c.lims {
		l.Close()
	}
	return nil
}
