package httpretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ErrThrottled is returned, wrapped, by RoundTrip when the host gate holds
// the request back for longer than its context's deadline or MaxWait
// allows: the server recently asked this Transport not to call the host
// before a time the request cannot wait for. No request was sent.
var ErrThrottled = errors.New("httpretry: host asked clients to wait")

// hostGates records, per host, the time before which no request may be
// sent. It is the zero value until the first push.
//
// Invariants: an entry's time only moves forward; entries in the past are
// dropped when the map grows, and it never holds more than maxGates
// entries (asks are chosen by servers and can be years long, so expiry
// alone would not bound it).
//
// Once any gate exists, every lookup takes mu; until then, used is false
// and lookups are one atomic load. used is set under mu before the first
// entry is stored, so a lookup that sees it false can only miss a gate
// that is being pushed concurrently, which it could equally have missed by
// running a moment earlier.
type hostGates struct {
	used  atomic.Bool
	mu    sync.Mutex
	until map[string]time.Time // guarded by mu
}

// gateSweepAt is the map size at which push drops expired entries.
const gateSweepAt = 64

// maxGates bounds the gates a Transport keeps. When every kept gate is
// still closed, a new host's gate replaces the one that opens first (or
// is not kept, if it would open before all of them). A gate that is not
// kept only costs the coordination between requests: each retry still
// waits for its own response's ask.
const maxGates = 1024

// push moves host's gate to now+d unless it is already later.
// (time.Time.Add saturates, so a huge d cannot wrap.)
func (g *hostGates) push(host string, now time.Time, d time.Duration) {
	at := now.Add(d)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.until == nil {
		g.until = make(map[string]time.Time)
		g.used.Store(true)
	}
	cur, ok := g.until[host]
	if ok {
		if at.After(cur) {
			g.until[host] = at
		}
		return
	}
	if len(g.until) >= gateSweepAt {
		for h, u := range g.until {
			if !u.After(now) {
				delete(g.until, h)
			}
		}
	}
	if len(g.until) >= maxGates {
		// Full of closed gates: drop the one that opens first, unless
		// the new one would open even sooner.
		first, firstAt := "", time.Time{}
		for h, u := range g.until {
			if first == "" || u.Before(firstAt) {
				first, firstAt = h, u
			}
		}
		if !at.After(firstAt) {
			return
		}
		delete(g.until, first)
	}
	g.until[host] = at
}

// opensAt returns the time host's gate opens (the zero Time when it has
// none).
func (g *hostGates) opensAt(host string) time.Time {
	if !g.used.Load() {
		return time.Time{}
	}
	g.mu.Lock()
	at := g.until[host]
	g.mu.Unlock()
	return at
}

// remaining returns how long host's gate stays closed after now (0 when
// open).
func (g *hostGates) remaining(host string, now time.Time) time.Duration {
	return until(g.opensAt(host), now)
}

// remainingNow returns how long host's gate stays closed, and the time it
// measured that from, read from clock after the gate: a gate is pushed at
// most MaxWait ahead of its pusher's clock, so measured from a later
// reading it is never further than MaxWait away. (Read before, a reading
// that went stale while another request pushed the gate would see it up
// to MaxWait plus the staleness away, and fail a request the gate lets
// through within MaxWait.)
func (g *hostGates) remainingNow(host string, clock func() time.Time) (time.Duration, time.Time) {
	at := g.opensAt(host)
	now := clock()
	return until(at, now), now
}

// gateKey names the gate of req's host: scheme and host:port as in the URL.
func gateKey(req *http.Request) string {
	if req.URL == nil {
		return ""
	}
	return req.URL.Scheme + "://" + req.URL.Host
}

// waitGate waits until host's gate opens, plus a jitter of up to
// BaseDelay. It returns an error wrapping ErrThrottled, without waiting,
// when the gate opens beyond the context's deadline or MaxWait, and the
// context's error when it ends during the wait. The jitter only spreads
// the waiters out: it is cut to what the deadline and MaxWait leave, so a
// gate that opens within them is always waited for.
func (t *Transport) waitGate(ctx context.Context, host string) error {
	g, now := t.gates.remainingNow(host, t.clock)
	if g <= 0 {
		return nil
	}
	if !t.fits(ctx, now, g) {
		return fmt.Errorf("%w: %s for %v more, beyond the request's deadline or MaxWait", ErrThrottled, host, g)
	}
	room := t.maxWait() - g
	if deadline, ok := ctx.Deadline(); ok {
		room = min(room, deadline.Sub(now)-1-g) // fits: a wait ends before the deadline
	}
	return t.wait(ctx, g+min(t.jitter(backoffCap(t.BaseDelay, t.MaxDelay, 0)), room))
}
