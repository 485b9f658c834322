package backend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/redis/go-redis/v9"
)

// ErrClosed is returned for a decision or an Update on a closed Store.
var ErrClosed = errors.New("backend: store closed")

// Store is an admission.Backend whose set of limits follows the
// configuration: Update replaces the set, keeping the state of every
// limit whose name it keeps. It is safe for concurrent use.
type Store struct {
	kind   Kind
	opts   Options
	client redis.Scripter        // Redis and Lease
	owned  redis.UniversalClient // the client Open made, closed by Close
	ropts  []redislimit.Option   // every redislimit.Limiter's options

	cur atomic.Pointer[set]
	mu  sync.Mutex // serializes Update and Close

	added   atomic.Pointer[set] // AddLimit's limits, copied on write
	addMu   sync.Mutex          // serializes AddLimit and Close
	addDone bool                // closed: AddLimit refuses (under addMu)

	stop chan struct{} // closed by Close: the sweeper returns
	done chan struct{} // closed when the sweeper has returned
}

// set is one immutable set of limits: every decision resolves all of its
// layers in the one set it loaded.
type set struct {
	policies map[string]hotlimit.Policy
	local    map[string]*hotlimit.Limiter   // Local
	remote   map[string]*redislimit.Limiter // Redis and Lease
	closed   bool                           // the Store's closed set: every decision fails with ErrClosed

	// drain: decisions hold use for reading, so that the limiters the
	// set's successor dropped are closed only once no decision uses
	// them (a lease Limiter must not be closed while it decides, and
	// RedisOptions may hold redislimit.WithLeases). A Local store does not need it:
	// a hotlimit.Limiter decides after Close.
	drain bool
	use   sync.RWMutex
}

// Open builds the Store that o describes with limits (each a hotlimit
// policy, by limit name), and, for Redis and Lease, checks that Redis
// answers (a PING within ctx). Its error names the option or the limit
// at fault. Lease takes hotlimit.TokenBucket and FixedWindow policies
// only. An empty limits is allowed: every layer is then of an unknown
// limit until Update gives some.
func Open(ctx context.Context, o Options, limits map[string]hotlimit.Policy) (*Store, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	s := &Store{kind: o.Kind, opts: o}
	if s.kind == "" {
		s.kind = Local
	}
	if s.kind != Local {
		s.client = o.Client
		if s.client == nil {
			s.owned = o.newClient()
			s.client = s.owned
		}
		if p, ok := s.client.(interface {
			Ping(context.Context) *redis.StatusCmd
		}); ok {
			if err := p.Ping(ctx).Err(); err != nil {
				s.closeClient()
				return nil, fmt.Errorf("backend: Redis %s does not answer: %w", s.where(), err)
			}
		}
		// One breaker for every limit (redislimit's default settings):
		// they share the client, and a node that fails fails them all.
		s.ropts = []redislimit.Option{redislimit.WithBreaker(redislimit.NewBreaker(5, time.Second))}
		if o.Prefix != "" {
			s.ropts = append(s.ropts, redislimit.WithPrefix(o.Prefix))
		}
		if o.HashTag != "" {
			s.ropts = append(s.ropts, redislimit.WithHashTag(o.HashTag))
		}
		if o.Timeout > 0 {
			s.ropts = append(s.ropts, redislimit.WithTimeout(o.Timeout))
		}
		s.ropts = append(s.ropts, o.RedisOptions...)
		if s.kind == Lease {
			// A lease's takes (a request's, and the background refills)
			// and give-backs have the Limiter's timeout.
			s.ropts = append(s.ropts, redislimit.WithLeases(o.MaxLease, o.LeasePeriod))
		}
	}
	g, err := s.build(&set{}, limits)
	if err != nil {
		s.closeClient()
		return nil, err
	}
	s.cur.Store(g)
	s.added.Store(&set{})
	if s.kind == Lease && o.SweepInterval >= 0 {
		every := o.SweepInterval
		if every == 0 {
			every = DefaultSweepInterval
		}
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go s.sweep(every)
	}
	return s, nil
}

// Kind returns the store's kind.
func (s *Store) Kind() Kind { return s.kind }

// Names returns the names of the current limits, sorted.
func (s *Store) Names() []string { return slices.Sorted(maps.Keys(s.cur.Load().policies)) }

// build returns the set of limits whose limiters are old's for the names
// old has, and new ones for the others. On error it closes the limiters
// it made and returns an error naming the limit.
func (s *Store) build(old *set, limits map[string]hotlimit.Policy) (*set, error) {
	g := &set{policies: maps.Clone(limits), drain: s.kind != Local}
	if g.policies == nil {
		g.policies = map[string]hotlimit.Policy{}
	}
	if s.kind == Local {
		g.local = make(map[string]*hotlimit.Limiter, len(limits))
	} else {
		g.remote = make(map[string]*redislimit.Limiter, len(limits))
	}
	var made []func() error
	fail := func(err error) (*set, error) {
		for _, c := range made {
			c()
		}
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(limits)) { // the first error is the same on every run
		p := limits[name]
		if op, ok := old.policies[name]; ok {
			if !reflect.DeepEqual(op, p) {
				return fail(fmt.Errorf("backend: limit %q: its policy changed but not its name (a limit's state is kept by name, so a new policy needs a new name)", name))
			}
			if g.local != nil {
				g.local[name] = old.local[name]
			} else {
				g.remote[name] = old.remote[name]
			}
			continue
		}
		if g.local != nil {
			l, err := hotlimit.New(p, s.opts.LocalOptions...)
			if err != nil {
				return fail(fmt.Errorf("backend: limit %q: %w", name, err))
			}
			g.local[name], made = l, append(made, l.Close)
			continue
		}
		l, err := redislimit.New(s.client, name, p, s.ropts...)
		if err != nil {
			return fail(fmt.Errorf("backend: limit %q: %w", name, err))
		}
		g.remote[name], made = l, append(made, l.Close)
	}
	return g, nil
}

// MaxAdded is the most limits AddLimit holds in one Store.
const MaxAdded = 256

// ErrTooManyLimits is AddLimit's error for a limit past MaxAdded.
var ErrTooManyLimits = errors.New("backend: too many limits added (MaxAdded)")

// AddLimit adds a limit beyond the set Update and Reload replace, such
// as one of a descriptor's own limit (hotlimitd's LimitAdder): it
// decides from then on, until Close, whatever the running set, with
// its state kept by its name as the others' are (in Redis, under the
// same key). Adding a name again with the same policy does nothing; with
// another policy, or a name of the running set, it is an error, and so
// is a limit past MaxAdded (ErrTooManyLimits), an invalid policy, and a
// closed Store (ErrClosed).
func (s *Store) AddLimit(name string, p hotlimit.Policy) error {
	if err := s.addedAs(s.added.Load(), name, p); err != errNotAdded {
		return err
	}
	s.addMu.Lock()
	defer s.addMu.Unlock()
	old := s.added.Load()
	if err := s.addedAs(old, name, p); err != errNotAdded {
		return err
	}
	switch {
	case s.addDone:
		return ErrClosed
	case s.cur.Load().policies[name] != nil:
		return fmt.Errorf("backend: limit %q is the configuration's: it cannot be added", name)
	case len(old.policies) >= MaxAdded:
		return ErrTooManyLimits
	}
	next := &set{policies: maps.Clone(old.policies), local: maps.Clone(old.local), remote: maps.Clone(old.remote)}
	if next.policies == nil {
		next.policies = map[string]hotlimit.Policy{}
	}
	next.policies[name] = p
	if s.kind == Local {
		l, err := hotlimit.New(p, s.opts.LocalOptions...)
		if err != nil {
			return fmt.Errorf("backend: limit %q: %w", name, err)
		}
		if next.local == nil {
			next.local = map[string]*hotlimit.Limiter{}
		}
		next.local[name] = l
	} else {
		l, err := redislimit.New(s.client, name, p, s.ropts...)
		if err != nil {
			return fmt.Errorf("backend: limit %q: %w", name, err)
		}
		if next.remote == nil {
			next.remote = map[string]*redislimit.Limiter{}
		}
		next.remote[name] = l
	}
	s.added.Store(next)
	return nil
}

var errNotAdded = errors.New("not added")

// addedAs returns nil when g holds name with policy p, an error when it
// holds it with another, and errNotAdded when it does not hold it.
func (s *Store) addedAs(g *set, name string, p hotlimit.Policy) error {
	op, ok := g.policies[name]
	switch {
	case !ok:
		return errNotAdded
	case reflect.DeepEqual(op, p):
		return nil
	}
	return fmt.Errorf("backend: limit %q was added with another policy", name)
}

// Update replaces the set of limits with limits, atomically for new
// decisions: a decision in flight is decided entirely by the set it
// started with. A limit whose name the new set keeps keeps its limiter
// and so its state (its keys' counts, its leases held in this process);
// a new name starts fresh; a limit the new set drops is closed once no
// decision uses it (a Lease store gives its leases back to Redis, see
// redislimit.Limiter.Close; a Redis store's state stays in Redis until its
// keys expire). A name whose policy changed is an error: the state of a
// limit is kept by its name, so a new policy needs a new name (as
// hotlimitd's config names its limits). On error the running set is
// kept.
func (s *Store) Update(limits map[string]hotlimit.Policy) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.swap(limits)
}

// swap makes limits the running set (Update); it requires s.mu.
func (s *Store) swap(limits map[string]hotlimit.Policy) error {
	old := s.cur.Load()
	if old.closed {
		return ErrClosed
	}
	g, err := s.build(old, limits)
	if err != nil {
		return err
	}
	s.cur.Store(g)
	s.retire(old, g)
	return nil
}

// Reload is Update for a service whose requests read the configuration
// first and then decide on the Store: it adds the limits of limits to
// the running ones (Update with both), calls publish, which makes the
// new configuration the one requests read, and then drops the limits
// that limits does not hold. A request that read either configuration
// during publish finds every limit it names. On error (a limit's policy
// changed under its name, an invalid policy) publish is not called and
// the running set is kept. Only a request that read the old
// configuration before publish and decides after Reload returns can
// name a dropped limit (an error wrapping admission.ErrUnknownLimit).
func (s *Store) Reload(limits map[string]hotlimit.Policy, publish func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	both := maps.Clone(s.cur.Load().policies)
	maps.Copy(both, limits)
	if err := s.swap(both); err != nil {
		return err
	}
	publish()
	return s.swap(limits) // every limiter is the running set's: nothing can fail
}

// retire closes the limiters of old that next does not hold, once no
// decision on old is in flight. next is nil to close them all.
func (s *Store) retire(old, next *set) {
	if old.drain {
		old.use.Lock() // waits for the decisions in flight on old
		defer old.use.Unlock()
	}
	for name, l := range old.local {
		if next == nil || next.local[name] != l {
			l.Close()
		}
	}
	for name, l := range old.remote {
		if next == nil || next.remote[name] != l {
			l.Close()
		}
	}
}

// enter returns the current set, held for reading when it drains; leave
// releases it.
func (s *Store) enter() *set {
	for {
		g := s.cur.Load()
		if !g.drain {
			return g
		}
		g.use.RLock()
		if s.cur.Load() == g {
			return g
		}
		g.use.RUnlock() // replaced meanwhile: its dropped limiters may be closed
	}
}

func (g *set) leave() {
	if g.drain {
		g.use.RUnlock()
	}
}

// Allow is AllowStates without the states nor the binding layer.
func (s *Store) Allow(ctx context.Context, layers []admission.Layer) (hotlimit.Decision, error) {
	d, _, err := s.AllowStates(ctx, layers, nil)
	return d, err
}

// AllowStates implements admission.Backend: every layer of the
// request is decided at once, all or nothing, by the one set of limits
// that was current when the call started. Local decides with
// hotlimit.AllowLayersState (no allocation for up to 8 layers on keys it
// holds); Redis with one script call (redislimit.AllowLayersState),
// exact across every replica on the same Redis; Lease in process from
// this replica's leases (states' Window is then hotlimit.Never). A layer
// naming a limit the set does not hold fails the call with an error
// wrapping admission.ErrUnknownLimit, and consumes nothing. Redis
// failures are returned as errors (wrapping redislimit.ErrUnavailable),
// with the Decision of the limiters' failure policy (a denial unless
// RedisOptions set another); the caller applies its own. states, when not nil, gets
// each layer's state after the decision; of another length than layers,
// it gets what it has room for and Remaining -1 beyond the layers.
func (s *Store) AllowStates(ctx context.Context, layers []admission.Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	g := s.enter()
	defer g.leave()
	if g.closed {
		return hotlimit.Decision{}, -1, ErrClosed
	}
	if g.local != nil {
		return g.allowLocal(s.added.Load().local, layers, states)
	}
	var buf [stackLayers]redislimit.Layer
	ls, err := resolve(buf[:0], g.remote, s.added.Load().remote, layers, func(l *redislimit.Limiter, ly admission.Layer) redislimit.Layer {
		return redislimit.Layer{Limiter: l, Key: ly.Key, Cost: ly.Cost}
	})
	if err != nil {
		return hotlimit.Decision{}, -1, err
	}
	return redislimit.AllowLayersState(patient(ctx), states, ls...)
}

// patient returns ctx with its deadline turned into a cancellation: ctx's
// values, and a context done when ctx is done, whose Err is then
// context.Canceled, without ctx's deadline.
//
// A caller's deadline shorter than Options.Timeout (Envoy's rate limit
// filter timeout, 20ms by default) then ends the call as a cancellation
// does, which the breaker does not count against the node: a Redis that
// pauses longer than the caller waits is slow, not dead, and must not
// open the breaker and fail the requests that come once it answers.
// (redislimit counts a caller's deadline that passes, so that a hung node
// opens its circuit however impatient the callers are; here only a call
// that Redis did not answer within Timeout, or a failed connection,
// counts.) A call that waits to be sent ends with its caller, so that a
// request its caller gave up on is not sent later.
//
// It is ctx itself when ctx has no deadline, else ctx wrapped
// (patientCtx): one allocation, where a cancellable context of its own,
// cancelled by an AfterFunc on ctx, costs several a call.
func patient(ctx context.Context) context.Context {
	if _, ok := ctx.Deadline(); !ok {
		return ctx
	}
	return patientCtx{ctx}
}

// patientCtx is a context's values and Done, without its deadline, and
// context.Canceled once it is done (cancelled, or its deadline passed). A
// context derived from it ends with it, and ends as the parent did (with
// context.DeadlineExceeded for a deadline that passed): only the
// patientCtx itself, which redislimit asks whether its caller gave up,
// says Canceled.
type patientCtx struct{ context.Context }

func (patientCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

func (c patientCtx) Err() error {
	if c.Context.Err() != nil {
		return context.Canceled
	}
	return nil
}

// stackLayers is the layers a decision resolves without allocating: the
// most an admission.Pipeline gives a backend (its group's, the global one
// and six identity layers); more go to the heap.
const stackLayers = 8

// resolve appends to dst, for each of layers, the layer mk makes of it
// on its limit's limiter in lims, else in added (AddLimit's), or returns
// an error wrapping admission.ErrUnknownLimit for a limit neither holds.
func resolve[L, T any](dst []T, lims, added map[string]*L, layers []admission.Layer, mk func(*L, admission.Layer) T) ([]T, error) {
	for _, ly := range layers {
		l := lims[ly.Limit]
		if l == nil {
			l = added[ly.Limit]
		}
		if l == nil {
			return nil, fmt.Errorf("%w %q", admission.ErrUnknownLimit, ly.Limit)
		}
		dst = append(dst, mk(l, ly))
	}
	return dst, nil
}

// allowLocal is AllowStates on a Local set.
func (g *set) allowLocal(added map[string]*hotlimit.Limiter, layers []admission.Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	var buf [stackLayers]hotlimit.Layer
	ls, err := resolve(buf[:0], g.local, added, layers, func(l *hotlimit.Limiter, ly admission.Layer) hotlimit.Layer {
		return hotlimit.Layer{Limiter: l, Key: ly.Key, Cost: ly.Cost}
	})
	if err != nil {
		return hotlimit.Decision{}, -1, err
	}
	if states == nil {
		d, i := hotlimit.AllowLayersState(nil, ls...)
		return d, i, nil
	}
	d, i := hotlimit.AllowLayersState(states, ls...)
	for j := len(ls); j < len(states); j++ {
		states[j] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: -1}} // no such layer: unknown
	}
	return d, i, nil
}

// sweep gives back, every interval, the leases of keys idle since the
// previous sweep, until Close.
func (s *Store) sweep(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		g := s.enter()
		for _, lims := range []map[string]*redislimit.Limiter{g.remote, s.added.Load().remote} {
			for _, l := range lims {
				ctx, cancel := context.WithTimeout(context.Background(), every)
				l.SweepLeases(ctx)
				cancel()
			}
		}
		g.leave()
	}
}

// Close stops the store: decisions and Updates after it fail with
// ErrClosed. It waits for the decisions in flight (Lease), closes every
// limiter (a Lease store gives back the units its leases hold, where
// the policy allows, see redislimit.Limiter.Close; units it cannot give back
// stay debited: never spent twice) and the client Open made. ctx is not
// Each give-back is bounded by the store's Timeout.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur.Load()
	if old.closed {
		return nil
	}
	if s.stop != nil {
		close(s.stop)
		<-s.done
	}
	s.cur.Store(&set{closed: true})
	s.retire(old, nil)
	s.addMu.Lock()
	s.addDone = true
	s.retire(s.added.Swap(&set{}), nil) // no decision is in flight: the closed set refuses them
	s.addMu.Unlock()
	return s.closeClient()
}

// Reset implements admission.Backend: key under the named limit of the
// current set is made fresh, in process (Local) or in Redis for every
// replica (Redis and Lease, redislimit's Limiter.Reset). It returns
// ErrClosed on a closed Store, and an error wrapping
// admission.ErrUnknownLimit for a limit the set does not hold.
func (s *Store) Reset(ctx context.Context, limit, key string) error {
	g := s.enter()
	defer g.leave()
	switch {
	case g.closed:
		return ErrClosed
	case g.local != nil:
		if l := g.local[limit]; l != nil {
			l.Reset(key)
			return nil
		}
	default:
		if l := g.remote[limit]; l != nil {
			return l.Reset(ctx, key)
		}
	}
	return fmt.Errorf("%w %q", admission.ErrUnknownLimit, limit)
}

var _ admission.Backend = (*Store)(nil)

// where names the Redis the store uses, for errors.
func (s *Store) where() string {
	switch {
	case s.owned == nil:
		return "(the given client)"
	case s.opts.SentinelMaster != "":
		return "master " + s.opts.SentinelMaster + " of the Sentinels at " + strings.Join(s.opts.RedisAddrs, ",")
	}
	return strings.Join(s.opts.RedisAddrs, ",")
}

func (s *Store) closeClient() error {
	if s.owned != nil {
		return s.owned.Close()
	}
	return nil
}
