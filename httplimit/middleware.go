package httplimit

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/ident"
)

// Middleware is rate-limiting net/http middleware: it puts each request
// in a route group, extracts the client's identity, asks a Backend to
// admit the request under the group's layer (and the global layer, all
// or nothing), and either calls the next handler or refuses the request
// (429, or 403 when it can never pass). See the package documentation.
//
// Create it with New; it is safe for concurrent use. Close releases the
// backend.
type Middleware struct {
	backend    Backend
	binder     BindingBackend // backend, when it reports the binding layer
	stater     StateBackend   // backend, when it reports every layer's state; nil when no field needs them
	groups     []groupState
	byName     map[string]int
	mux        *http.ServeMux // pattern → group; nil with classify
	byPattern  map[string]int
	classify   func(*http.Request) string
	defaultIdx int
	key        KeyFunc
	global     *policyInfo
	globalCost int64
	exempt     map[string]struct{}
	clientIP   *ClientIP
	onKeyError KeyErrorMode
	onBackend  FailMode
	headers    HeaderMode
	reset      ResetMode
	problem    bool
	dryRun     bool
	hook       func(Event)
	deny       func(http.ResponseWriter, *http.Request, Denial)
	version    string
	now        func() time.Time
	wait       func(context.Context, time.Duration) error
	seed       maphash.Seed
	kinds      ident.Kinds // Event.IdentityKind's interned values
}

// maxKeyBuf is the key length the middleware builds without growing its
// buffer.
const maxKeyBuf = 160

// scratch is a request's reusable buffers: the key under construction,
// the layers handed to the Backend (which must not retain them) and what
// the Backend said of them. They would escape to the heap through the
// KeyFunc and Backend calls; pooling them saves allocations per request.
type scratch struct {
	buf     [maxKeyBuf]byte
	layers  [2]Layer
	states  [2]LayerState
	nlayers int // layers in use; 0 when no Backend was asked
	nstates int // states the Backend reported: nlayers or 0
	bind    int // the layer the Decision describes
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

const keyPrefix = "rl:v1:"

// New validates cfg, builds its backend, and returns the Middleware. The
// error names the offending field.
func New(cfg Config) (*Middleware, error) {
	if err := cfg.checkFields(); err != nil {
		return nil, err
	}
	m := newMiddleware(&cfg)
	limits, err := describeLimits(cfg.Limits)
	if err != nil {
		return nil, err
	}
	if cfg.Global != "" {
		if m.global = limits[cfg.Global]; m.global == nil {
			return nil, fmt.Errorf("httplimit: Config.Global %q is not in Config.Limits", cfg.Global)
		}
	}
	if err := m.buildGroups(cfg.Groups, cfg.DefaultGroup, limits); err != nil {
		return nil, err
	}
	if cfg.Classify == nil {
		if err := m.buildMux(cfg.Groups); err != nil {
			return nil, err
		}
	}
	if err := m.buildBackend(cfg.Backend, cfg.Limits); err != nil {
		return nil, err
	}
	if err := m.checkCosts(cfg.Groups); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// checkCosts refuses a fixed cost above its limit's capacity (q, which is
// the largest cost each algorithm can ever admit): every request it
// prices would be refused with 403 for ever. It runs after the backend
// has validated the policies, so an invalid policy is reported as such.
func (m *Middleware) checkCosts(groups []Group) error {
	for i, g := range groups {
		gs := &m.groups[i]
		if !gs.exempt && g.CostFunc == nil && gs.cost > gs.policy.Limit {
			return fmt.Errorf("httplimit: group %q: Cost %d is above limit %q's capacity %d: no request could ever pass (a CostFunc may price single requests above it)", g.Name, gs.cost, g.Limit, gs.policy.Limit)
		}
	}
	if m.global != nil && m.globalCost > m.global.Limit {
		return fmt.Errorf("httplimit: Config.GlobalCost %d is above limit %q's capacity %d: no request could ever pass", m.globalCost, m.global.name, m.global.Limit)
	}
	return nil
}

// newMiddleware copies the settings of a checked cfg that need no
// validation against other fields, applying their defaults.
func newMiddleware(cfg *Config) *Middleware {
	m := &Middleware{
		classify:   cfg.Classify,
		key:        cfg.Key,
		clientIP:   cfg.ClientIP,
		onKeyError: cfg.OnKeyError,
		onBackend:  cfg.OnBackendError,
		headers:    cfg.Headers,
		reset:      cfg.Reset,
		problem:    cfg.ProblemDetails,
		dryRun:     cfg.DryRun,
		hook:       cfg.Hook,
		deny:       cfg.Deny,
		version:    cfg.PolicyVersion,
		now:        cfg.Now,
		wait:       cfg.Wait,
		seed:       maphash.MakeSeed(),
		globalCost: cfg.GlobalCost,
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.wait == nil {
		m.wait = waitTimer
	}
	if m.globalCost == 0 {
		m.globalCost = 1
	}
	if len(cfg.ExemptIdentities) > 0 {
		m.exempt = make(map[string]struct{}, len(cfg.ExemptIdentities))
		for _, id := range cfg.ExemptIdentities {
			m.exempt[id] = struct{}{}
		}
	}
	return m
}

// describeLimits checks every limit's name and policy and describes it
// for the headers, in name order so that the first error is the same on
// every run.
func describeLimits(limits map[string]hotlimit.Policy) (map[string]*policyInfo, error) {
	infos := make(map[string]*policyInfo, len(limits))
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !ident.ValidName(name) {
			return nil, fmt.Errorf("httplimit: Config.Limits: name %q must be 1 to 64 letters, digits or \"._-\"", name)
		}
		info, err := describePolicy(name, limits[name])
		if err != nil {
			return nil, err
		}
		infos[name] = &info
	}
	return infos, nil
}

// buildBackend builds the backend from limits with factory (Local when
// nil), naming Config.Backend in its error.
func (m *Middleware) buildBackend(factory BackendFactory, limits map[string]hotlimit.Policy) error {
	if factory == nil {
		factory = LocalBackend()
	}
	b, err := factory(limits)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "httplimit: ") {
			err = fmt.Errorf("httplimit: Config.Backend: %w", err)
		}
		return err
	}
	if b == nil {
		return errors.New("httplimit: Config.Backend returned a nil Backend")
	}
	m.backend = b
	m.binder, _ = b.(BindingBackend)
	if m.problem || !m.dryRun && (m.headers == HeadersIETF || m.headers == HeadersBoth) {
		m.stater, _ = b.(StateBackend) // read the states only where they are written
	}
	return nil
}

// Backend returns the backend the middleware decides through, such as a
// *Local whose limiters a metrics collector can read.
func (m *Middleware) Backend() Backend { return m.backend }

// Close closes the backend if it has a Close method.
func (m *Middleware) Close() error {
	switch b := m.backend.(type) {
	case io.Closer:
		return b.Close()
	case interface{ Close() }:
		b.Close()
	}
	return nil
}

// Handler returns next wrapped in the rate limit.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	g := &m.groups[m.group(r)]
	if g.exempt {
		m.finish(w, r, next, g, Event{Outcome: OutcomeExempt}, nil)
		return
	}
	sc := scratchPool.Get().(*scratch)
	ev := m.decide(r, g, sc)
	var violated []string
	if sc.nlayers > 0 && (ev.Outcome == OutcomeAllowed || ev.Outcome == OutcomeDenied || ev.Outcome == OutcomeDryRunDenied) {
		if !m.dryRun && m.headers != HeadersNone {
			m.writeHeaders(w.Header(), g, sc, ev.Decision)
		}
		if ev.Outcome == OutcomeDenied && (m.problem || m.deny != nil) {
			violated = g.violated(sc)
		}
	}
	sc.layers, sc.states, sc.nlayers, sc.nstates = [2]Layer{}, [2]LayerState{}, 0, 0 // keep no key alive in the pool
	scratchPool.Put(sc)
	m.finish(w, r, next, g, ev, violated)
}

// errBadKeyFunc reports a KeyFunc that did not append to its dst.
var errBadKeyFunc = errors.New("httplimit: KeyFunc returned no identity appended to dst")

// decide extracts the key, prices the request and asks the backend, using
// sc's buffers.
func (m *Middleware) decide(r *http.Request, g *groupState, sc *scratch) Event {
	prefix := append(sc.buf[:0], keyPrefix...)
	key, err := m.key(prefix, r)
	if err == nil && (len(key) <= len(keyPrefix) || string(key[:len(keyPrefix)]) != keyPrefix) {
		err = errBadKeyFunc
	}
	fallback := false
	if err != nil && m.onKeyError == KeyErrorFallbackIP {
		fallback = true
		key, err = m.clientIP.appendKey(append(sc.buf[:0], keyPrefix...), r)
	}
	if err != nil {
		return m.refused(Event{Outcome: OutcomeKeyDenied, Err: err, Fallback: fallback})
	}
	id := key[len(keyPrefix):]
	var idHash uint64
	var kind string
	if m.hook != nil {
		idHash, kind = maphash.Bytes(m.seed, id), m.kinds.Of(id)
	}
	if m.exempt != nil {
		if _, ok := m.exempt[string(id)]; ok {
			return Event{Outcome: OutcomeExempt, IdentityHash: idHash, IdentityKind: kind, Fallback: fallback}
		}
	}
	cost, err := g.price(r)
	if err != nil {
		return m.refused(Event{Outcome: OutcomeCostInvalid, Err: err, IdentityHash: idHash, IdentityKind: kind, Fallback: fallback})
	}
	key = append(key, ":route:"...)
	key = append(key, g.name...)
	full := string(key) // the one allocation of the key
	layers := sc.layers[:1]
	layers[0] = Layer{Limit: g.policy.name, Key: full, Cost: cost}
	if m.global != nil {
		layers = append(layers, Layer{Limit: m.global.name, Key: full[:len(keyPrefix)+len(id)], Cost: m.globalCost})
	}
	sc.nlayers = len(layers)
	idx := -1
	var d hotlimit.Decision
	switch {
	case m.stater != nil:
		d, idx, err = m.stater.AllowStates(r.Context(), layers, sc.states[:len(layers)])
		if err == nil && sc.states[0].Remaining >= 0 && (len(layers) == 1 || sc.states[1].Remaining >= 0) {
			sc.nstates = len(layers)
		}
	case m.binder != nil:
		d, idx, err = m.binder.AllowBinding(r.Context(), layers)
	default:
		d, err = m.backend.Allow(r.Context(), layers)
	}
	ev := Event{IdentityHash: idHash, IdentityKind: kind, Fallback: fallback, Decision: d, Err: err}
	switch {
	case err != nil:
		sc.nlayers, sc.nstates = 0, 0 // no fields: nothing was decided
		ev.Outcome, ev.Decision = OutcomeErrorDenied, hotlimit.Decision{}
		if m.onBackend == FailOpen || m.dryRun {
			ev.Outcome = OutcomeErrorAllowed
		}
		return ev
	case d.Allowed:
		ev.Outcome = OutcomeAllowed
	case m.dryRun:
		ev.Outcome = OutcomeDryRunDenied
	default:
		ev.Outcome = OutcomeDenied
	}
	sc.bind = m.binding(g, d, idx)
	binding := g.policy
	if sc.bind == 1 {
		binding = m.global
	}
	ev.Algorithm, ev.Limit = binding.Algorithm.String(), binding.name
	if sc.nstates > 0 && sc.states[sc.bind].Policy.Algorithm != 0 {
		ev.Algorithm = sc.states[sc.bind].Policy.Algorithm.String() // in force at the decision
	}
	return ev
}

// refused returns ev, a request refused before the backend was asked, as
// DryRun has it: let through, as OutcomeDryRunDenied.
func (m *Middleware) refused(ev Event) Event {
	if m.dryRun {
		ev.Outcome = OutcomeDryRunDenied // it would have been refused
	}
	return ev
}

// binding returns the index of the layer the Decision describes: layer
// idx (0 the group's, 1 the global) when the backend reported it, else
// the layer whose capacity is d.Limit, the group's when both have the
// same capacity.
func (m *Middleware) binding(g *groupState, d hotlimit.Decision, idx int) int {
	switch {
	case idx == 1 && m.global != nil:
		return 1
	case idx == 0:
		return 0
	case m.global != nil && d.Limit != g.policy.Limit && d.Limit == m.global.Limit:
		return 1
	}
	return 0
}

// violated returns the RateLimit item names of the layers that refused
// the request: those whose state has fewer units than the request costs
// there, or, when the backend reported no states, the binding layer.
func (g *groupState) violated(sc *scratch) []string {
	if sc.nstates == 0 {
		return []string{g.names[sc.bind]}
	}
	var out []string
	for i := range sc.nstates {
		if sc.states[i].Remaining < sc.layers[i].Cost {
			out = append(out, g.names[i])
		}
	}
	if len(out) == 0 { // the states moved since the decision
		out = append(out, g.names[sc.bind])
	}
	return out
}

// finish counts, reports, and either serves the request or refuses it.
// violated names the limits a denied request exceeded, for the problem
// details body.
func (m *Middleware) finish(w http.ResponseWriter, r *http.Request, next http.Handler, g *groupState, ev Event, violated []string) {
	g.counts[ev.Outcome].Add(1)
	if m.hook != nil {
		ev.Request, ev.Group, ev.PolicyVersion = r, g.name, m.version
		m.hook(ev)
	}
	if ev.Outcome.Passed() {
		// A dry run does not shape either: it changes nothing for the
		// client.
		if ev.Decision.Delay > 0 && ev.Outcome == OutcomeAllowed && !m.dryRun {
			if m.wait(r.Context(), ev.Decision.Delay) != nil {
				return
			}
		}
		next.ServeHTTP(w, r)
		return
	}
	den := denialOf(ev, violated)
	if den.RetryAfter > 0 {
		w.Header()["Retry-After"] = []string{strconv.FormatInt(den.RetryAfter, 10)}
	}
	switch {
	case m.deny != nil:
		m.deny(w, r, den)
	case m.problem && ev.Outcome == OutcomeDenied:
		writeProblem(w, den)
	default:
		writeDenial(w, den)
	}
}
