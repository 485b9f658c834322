package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotlimit/hotlimit"
)

// Group is a route group: routes that cost the same, limited together.
// Group routes by what they cost, not by how their URLs are spelled: the
// aliases of one endpoint ("/search", "/v1/search") belong to one group
// and share its quota.
type Group struct {
	// Name identifies the group in keys, headers, hooks and metrics:
	// letters, digits and "._-", at most 64 bytes.
	Name string
	// Patterns are net/http.ServeMux patterns ("GET /v1/search",
	// "/items/{id}", "api.example.com/"), matched as ServeMux matches
	// them, after cleaning the path, so "//v1/./search" is "/v1/search".
	// A request matching no pattern of any group is in DefaultGroup.
	Patterns []string
	// Limit names the policy in Config.Limits this group's layer uses.
	// Required unless Exempt.
	Limit string
	// Cost is what one request costs in that limit; 0 means 1.
	Cost int64
	// Exempt marks a group that is not limited at all (health checks,
	// metrics scrapes). It is the only way a route bypasses the limits,
	// and its requests are still counted and reported to the hook.
	Exempt bool
}

// KeyErrorMode is what the middleware does when Config.Key cannot
// extract a key from a request.
type KeyErrorMode uint8

const (
	// KeyErrorDeny answers 429 without Retry-After (the request can
	// never pass as it is) and the body
	// {"error":"rate_limit_key_missing"}. It is the default.
	KeyErrorDeny KeyErrorMode = iota
	// KeyErrorFallbackIP limits the request by its client IP instead
	// (Config.ClientIP), under the same layers. If even the IP cannot be
	// found, the request is denied as with KeyErrorDeny.
	KeyErrorFallbackIP
)

// FailMode is what the middleware does when the Backend cannot decide
// (Allow returns an error: a shared store down, a timeout).
type FailMode uint8

const (
	// FailClosed answers 503 Service Unavailable with
	// {"error":"rate_limiter_unavailable"} and no rate-limit headers. It
	// is the default: the limit protects something, and when it cannot be
	// checked the safe answer is not to do the work. It is a 503, not a
	// 429, because the client did nothing wrong and has no quota to wait
	// for; a 429 with invented headers would be a lie.
	FailClosed FailMode = iota
	// FailOpen lets the request through without rate-limit headers.
	FailOpen
)

// Outcome is what the middleware did with one request.
type Outcome uint8

// The outcomes, in the order of Counts' arrays.
const (
	Allowed      Outcome = iota // the backend admitted it
	Denied                      // the backend denied it: 429
	DryRunDenied                // the backend denied it, or no key could be extracted, but DryRun let it through
	Exempt                      // an exempt group or identity: not limited
	KeyDenied                   // no key could be extracted: denied
	ErrorAllowed                // the backend failed, FailOpen (or DryRun) let it through
	ErrorDenied                 // the backend failed, FailClosed answered 503
	NumOutcomes                 // the number of outcomes
)

var outcomeNames = [NumOutcomes]string{"allowed", "denied", "dry_run_denied", "exempt", "key_denied", "error_allowed", "error_denied"}

// String returns the outcome's snake_case name, as used in metrics.
func (o Outcome) String() string {
	if o < NumOutcomes {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Passed reports whether the handler was called.
func (o Outcome) Passed() bool {
	return o == Allowed || o == DryRunDenied || o == Exempt || o == ErrorAllowed
}

// Event describes one decision, for Config.Hook.
type Event struct {
	// Request is the request decided on, for its method, path and the
	// like. It carries the client's credentials (an Authorization
	// header): log fields of it, never its headers wholesale.
	Request *http.Request
	Group   string  // the route group
	Outcome Outcome // what the middleware did
	// IdentityHash identifies the client without revealing it: a seeded
	// 64-bit hash of the identity (the KeyFunc's output, itself already
	// a hash for tokens), stable for the middleware's life and
	// meaningless outside it. 0 when no key was extracted.
	IdentityHash uint64
	// Fallback reports that the key is the client IP because Config.Key
	// failed (KeyErrorFallbackIP).
	Fallback bool
	// Algorithm and Limit describe the binding limit (the one named in
	// the RateLimit header); empty for exempt requests and key failures.
	Algorithm string
	Limit     string
	// PolicyVersion is Config.PolicyVersion.
	PolicyVersion string
	// Decision is the backend's decision (zero when there was none).
	Decision hotlimit.Decision
	// Err is the key extraction or backend error, if any.
	Err error
}

// Denial describes a refused request, for Config.Deny.
type Denial struct {
	// Status is the status the default responder would write: 429, or
	// 503 for a backend failure under FailClosed.
	Status int
	// Reason is "rate_limit_exceeded", "rate_limit_key_missing" or
	// "rate_limiter_unavailable".
	Reason string
	// RetryAfter is the Retry-After value in seconds that the middleware
	// already set on the response, or 0 when it set none.
	RetryAfter int64
	// Decision is the backend's decision (zero for key and backend
	// failures).
	Decision hotlimit.Decision
}

// Config configures a Middleware. Limits, Groups, DefaultGroup and Key
// are required.
type Config struct {
	// Limits are the named policies: hotlimit.TokenBucket,
	// hotlimit.FixedWindow, ... values (or pointers), passed to Backend.
	// Names are letters, digits and "._-", at most 64 bytes.
	Limits map[string]hotlimit.Policy
	// Groups are the route groups.
	Groups []Group
	// DefaultGroup names the group of a request that no pattern matches.
	DefaultGroup string
	// Classify, if set, replaces pattern matching: it returns the name
	// of the request's group. An unknown name means DefaultGroup.
	Classify func(*http.Request) string
	// Key extracts the identity a request is limited by.
	Key KeyFunc
	// Global, if set, names a limit applied to every request's identity
	// on top of its group's, all or nothing: a request the global layer
	// denies does not consume its group's quota, and the other way round.
	Global string
	// GlobalCost is what one request costs in Global; 0 means 1.
	GlobalCost int64
	// ExemptIdentities lists identities (as Key writes them, such as
	// "tenant:internal") that are never limited. Requests from them are
	// still counted and reported to the hook as Exempt.
	ExemptIdentities []string
	// ClientIP finds the client address for KeyErrorFallbackIP. nil: the
	// peer address only.
	ClientIP *ClientIP
	// OnKeyError is what to do when Key fails. Default KeyErrorDeny.
	OnKeyError KeyErrorMode
	// OnBackendError is what to do when the backend fails. Default
	// FailClosed.
	OnBackendError FailMode
	// Headers selects the rate-limit header fields. Default HeadersIETF.
	Headers HeaderMode
	// Reset selects the form of X-RateLimit-Reset. Default ResetSeconds.
	Reset ResetMode
	// DryRun makes every decision (consuming quota, counting, calling
	// the hook, with outcome DryRunDenied for a denial) but lets every
	// request through at once and writes no rate-limit headers: a limit
	// can be dark-launched and watched before it is enforced. It
	// overrides OnKeyError's denial (outcome DryRunDenied, Event.Err set)
	// and OnBackendError's FailClosed (outcome ErrorAllowed), and waits
	// out no LeakyBucket Delay.
	DryRun bool
	// Hook, if set, is called synchronously once per request, before the
	// handler or the denial, for logging and metrics: on the request's
	// goroutine, so concurrently for concurrent requests. It must be
	// fast, safe for concurrent use, and must not write to the response.
	Hook func(Event)
	// Deny, if set, writes refused responses in place of the default
	// JSON body, e.g. {"error":"rate_limit_exceeded","retry_after":12}.
	// The rate-limit headers and Retry-After are already set; Deny must
	// call WriteHeader with a status (Denial.Status is the default's).
	Deny func(w http.ResponseWriter, r *http.Request, d Denial)
	// Backend builds the backend from Limits. nil: LocalBackend().
	Backend BackendFactory
	// PolicyVersion is reported in every Event, to tell which
	// configuration made a decision.
	PolicyVersion string
	// Now reads the wall clock for ResetEpoch. nil: time.Now.
	Now func() time.Time
	// Wait is how an admitted request waits out a LeakyBucket's
	// Decision.Delay (shaping) before the handler is called. It returns
	// an error if the request's context ends first; the request is then
	// dropped without a response (the client has gone) and the quota
	// stays spent. nil: a timer, in real time.
	Wait func(ctx context.Context, d time.Duration) error
}

// waitTimer is the default Config.Wait.
func waitTimer(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Middleware is rate-limiting net/http middleware: it puts each request
// in a route group, extracts the client's identity, asks a Backend to
// admit the request under the group's layer (and the global layer, all
// or nothing), and either calls the next handler or answers 429. See the
// package documentation.
//
// Create it with New; it is safe for concurrent use. Close releases the
// backend.
type Middleware struct {
	backend    Backend
	binder     BindingBackend // backend, when it reports the binding layer
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
	dryRun     bool
	hook       func(Event)
	deny       func(http.ResponseWriter, *http.Request, Denial)
	version    string
	now        func() time.Time
	wait       func(context.Context, time.Duration) error
	seed       maphash.Seed
}

// groupState is a group's configuration and counters.
//
// Invariants: every field but counts is written only by New.
type groupState struct {
	name     string
	exempt   bool
	cost     int64
	policy   *policyInfo
	policies []string // RateLimit-Policy value: the group's item, then Global's
	counts   [NumOutcomes]atomic.Uint64
}

// maxKeyBuf is the key length the middleware builds without growing its
// buffer.
const maxKeyBuf = 160

// scratch is a request's reusable buffers: the key under construction and
// the layers handed to the Backend (which must not retain them). Both
// would escape to the heap through the KeyFunc and Backend calls; pooling
// them saves two allocations per request.
type scratch struct {
	buf     [maxKeyBuf]byte
	layers  [2]Layer
	binding *policyInfo // the limit decide's Decision describes; nil in the pool
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

const keyPrefix = "rl:v1:"

// New validates cfg, builds its backend, and returns the Middleware. The
// error names the offending field.
func New(cfg Config) (*Middleware, error) {
	m := &Middleware{
		byName:     make(map[string]int, len(cfg.Groups)),
		classify:   cfg.Classify,
		key:        cfg.Key,
		clientIP:   cfg.ClientIP,
		onKeyError: cfg.OnKeyError,
		onBackend:  cfg.OnBackendError,
		headers:    cfg.Headers,
		reset:      cfg.Reset,
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
	switch {
	case cfg.Key == nil:
		return nil, errors.New("httplimit: Config.Key is required")
	case len(cfg.Groups) == 0:
		return nil, errors.New("httplimit: Config.Groups is empty")
	case cfg.OnKeyError > KeyErrorFallbackIP:
		return nil, fmt.Errorf("httplimit: Config.OnKeyError %d is not a KeyErrorMode", cfg.OnKeyError)
	case cfg.OnBackendError > FailOpen:
		return nil, fmt.Errorf("httplimit: Config.OnBackendError %d is not a FailMode", cfg.OnBackendError)
	case cfg.Headers > HeadersNone:
		return nil, fmt.Errorf("httplimit: Config.Headers %d is not a HeaderMode", cfg.Headers)
	case cfg.Reset > ResetEpoch:
		return nil, fmt.Errorf("httplimit: Config.Reset %d is not a ResetMode", cfg.Reset)
	case cfg.GlobalCost < 0:
		return nil, fmt.Errorf("httplimit: Config.GlobalCost must be ≥ 0, got %d", cfg.GlobalCost)
	}
	if m.globalCost == 0 {
		m.globalCost = 1
	}
	if cfg.ClientIP != nil {
		if err := cfg.ClientIP.validate(); err != nil {
			return nil, err
		}
	}
	infos := make(map[string]*policyInfo, len(cfg.Limits))
	names := make([]string, 0, len(cfg.Limits))
	for name := range cfg.Limits {
		names = append(names, name)
	}
	sort.Strings(names) // the first error is the same on every run
	for _, name := range names {
		if !validName(name) {
			return nil, fmt.Errorf("httplimit: Config.Limits: name %q must be 1 to 64 letters, digits or \"._-\"", name)
		}
		info, err := describePolicy(name, cfg.Limits[name])
		if err != nil {
			return nil, err
		}
		infos[name] = &info
	}
	if cfg.Global != "" {
		if m.global = infos[cfg.Global]; m.global == nil {
			return nil, fmt.Errorf("httplimit: Config.Global %q is not in Config.Limits", cfg.Global)
		}
	}
	m.groups = make([]groupState, len(cfg.Groups))
	for i, g := range cfg.Groups {
		gs := &m.groups[i]
		if !validName(g.Name) {
			return nil, fmt.Errorf("httplimit: Config.Groups[%d]: name %q must be 1 to 64 letters, digits or \"._-\"", i, g.Name)
		}
		if _, dup := m.byName[g.Name]; dup {
			return nil, fmt.Errorf("httplimit: Config.Groups[%d]: duplicate group %q", i, g.Name)
		}
		m.byName[g.Name] = i
		gs.name, gs.exempt, gs.cost = g.Name, g.Exempt, g.Cost
		if g.Cost < 0 {
			return nil, fmt.Errorf("httplimit: group %q: Cost must be ≥ 0, got %d", g.Name, g.Cost)
		}
		if gs.cost == 0 {
			gs.cost = 1
		}
		if g.Exempt {
			continue
		}
		if gs.policy = infos[g.Limit]; gs.policy == nil {
			return nil, fmt.Errorf("httplimit: group %q: Limit %q is not in Config.Limits", g.Name, g.Limit)
		}
		v := gs.policy.item
		if m.global != nil {
			v += ", " + m.global.item
		}
		gs.policies = []string{v}
	}
	var ok bool
	if m.defaultIdx, ok = m.byName[cfg.DefaultGroup]; !ok {
		return nil, fmt.Errorf("httplimit: Config.DefaultGroup %q is not a group", cfg.DefaultGroup)
	}
	if cfg.Classify == nil {
		if err := m.buildMux(cfg.Groups); err != nil {
			return nil, err
		}
	}
	if len(cfg.ExemptIdentities) > 0 {
		m.exempt = make(map[string]struct{}, len(cfg.ExemptIdentities))
		for _, id := range cfg.ExemptIdentities {
			m.exempt[id] = struct{}{}
		}
	}
	factory := cfg.Backend
	if factory == nil {
		factory = LocalBackend()
	}
	b, err := factory(cfg.Limits)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "httplimit: ") {
			err = fmt.Errorf("httplimit: Config.Backend: %w", err)
		}
		return nil, err
	}
	if b == nil {
		return nil, errors.New("httplimit: Config.Backend returned a nil Backend")
	}
	m.backend = b
	m.binder, _ = b.(BindingBackend)
	return m, nil
}

// buildMux registers every group's patterns on a ServeMux used only to
// match requests to patterns. ServeMux panics on a bad or conflicting
// pattern; that is turned into an error.
func (m *Middleware) buildMux(groups []Group) (err error) {
	m.mux = http.NewServeMux()
	m.byPattern = make(map[string]int)
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for i, g := range groups {
		for _, p := range g.Patterns {
			if _, dup := m.byPattern[p]; dup {
				return fmt.Errorf("httplimit: group %q: pattern %q is already in group %q", g.Name, p, groups[m.byPattern[p]].Name)
			}
			if err := handleNoPanic(m.mux, p, noop); err != nil {
				return fmt.Errorf("httplimit: group %q: %w", g.Name, err)
			}
			m.byPattern[p] = i
		}
	}
	return nil
}

func handleNoPanic(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pattern %q: %v", pattern, r)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// group returns the request's group index.
func (m *Middleware) group(r *http.Request) int {
	if m.classify != nil {
		if i, ok := m.byName[m.classify(r)]; ok {
			return i
		}
		return m.defaultIdx
	}
	_, pattern := m.mux.Handler(r)
	if i, ok := m.byPattern[pattern]; ok {
		return i
	}
	return m.defaultIdx
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

// GroupCounts are one group's request counts by Outcome since New.
type GroupCounts struct {
	Group  string
	Counts [NumOutcomes]uint64 // indexed by Outcome
}

// Counts returns every group's counts, in Config.Groups order. Each count
// is read atomically; together they are not a snapshot of one instant.
// Counting costs each request one atomic add on its group's counter.
func (m *Middleware) Counts() []GroupCounts {
	out := make([]GroupCounts, len(m.groups))
	for i := range m.groups {
		g := &m.groups[i]
		out[i].Group = g.name
		for o := range g.counts {
			out[i].Counts[o] = g.counts[o].Load()
		}
	}
	return out
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
		m.finish(w, r, next, g, Event{Outcome: Exempt})
		return
	}
	sc := scratchPool.Get().(*scratch)
	ev := m.decide(r, g, sc)
	binding := sc.binding
	sc.layers, sc.binding = [2]Layer{}, nil // keep no key alive in the pool
	scratchPool.Put(sc)
	if ev.Outcome == Allowed || ev.Outcome == Denied || ev.Outcome == DryRunDenied {
		if !m.dryRun && m.headers != HeadersNone && binding != nil {
			m.writeHeaders(w.Header(), g.policies, binding, ev.Decision)
		}
	}
	m.finish(w, r, next, g, ev)
}

// errBadKeyFunc reports a KeyFunc that did not append to its dst.
var errBadKeyFunc = errors.New("httplimit: KeyFunc returned no identity appended to dst")

// decide extracts the key and asks the backend, using sc's buffers.
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
		ev := Event{Outcome: KeyDenied, Err: err, Fallback: fallback}
		if m.dryRun {
			ev.Outcome = DryRunDenied // it would have been denied
		}
		return ev
	}
	id := key[len(keyPrefix):]
	var idHash uint64
	if m.hook != nil {
		idHash = maphash.Bytes(m.seed, id)
	}
	if m.exempt != nil {
		if _, ok := m.exempt[string(id)]; ok {
			return Event{Outcome: Exempt, IdentityHash: idHash, Fallback: fallback}
		}
	}
	key = append(key, ":route:"...)
	key = append(key, g.name...)
	full := string(key) // the one allocation of the key
	layers := sc.layers[:1]
	layers[0] = Layer{Limit: g.policy.name, Key: full, Cost: g.cost}
	if m.global != nil {
		layers = append(layers, Layer{Limit: m.global.name, Key: full[:len(keyPrefix)+len(id)], Cost: m.globalCost})
	}
	idx := -1
	var d hotlimit.Decision
	if m.binder != nil {
		d, idx, err = m.binder.AllowBinding(r.Context(), layers)
	} else {
		d, err = m.backend.Allow(r.Context(), layers)
	}
	ev := Event{IdentityHash: idHash, Fallback: fallback, Decision: d, Err: err}
	switch {
	case err != nil:
		ev.Outcome, ev.Decision = ErrorDenied, hotlimit.Decision{}
		if m.onBackend == FailOpen || m.dryRun {
			ev.Outcome = ErrorAllowed
		}
		return ev
	case d.Allowed:
		ev.Outcome = Allowed
	case m.dryRun:
		ev.Outcome = DryRunDenied
	default:
		ev.Outcome = Denied
	}
	binding := m.binding(g, d, idx)
	ev.Algorithm, ev.Limit = binding.algorithm, binding.name
	sc.binding = binding
	return ev
}

// binding returns the limit the Decision describes: layer idx (0 the
// group's, 1 the global) when the backend reported it, else the layer
// whose capacity is d.Limit, the group's when both have the same capacity.
func (m *Middleware) binding(g *groupState, d hotlimit.Decision, idx int) *policyInfo {
	switch {
	case idx == 1 && m.global != nil:
		return m.global
	case idx == 0:
		return g.policy
	case m.global != nil && d.Limit != g.policy.q && d.Limit == m.global.q:
		return m.global
	}
	return g.policy
}

// finish counts, reports, and either serves the request or refuses it.
func (m *Middleware) finish(w http.ResponseWriter, r *http.Request, next http.Handler, g *groupState, ev Event) {
	g.counts[ev.Outcome].Add(1)
	if m.hook != nil {
		ev.Request, ev.Group, ev.PolicyVersion = r, g.name, m.version
		m.hook(ev)
	}
	if ev.Outcome.Passed() {
		// A dry run does not shape either: it changes nothing for the
		// client.
		if ev.Decision.Delay > 0 && ev.Outcome == Allowed && !m.dryRun {
			if m.wait(r.Context(), ev.Decision.Delay) != nil {
				return
			}
		}
		next.ServeHTTP(w, r)
		return
	}
	den := Denial{Status: http.StatusTooManyRequests, Reason: "rate_limit_exceeded", Decision: ev.Decision}
	switch ev.Outcome {
	case KeyDenied:
		den.Reason, den.Decision = "rate_limit_key_missing", hotlimit.Decision{}
	case ErrorDenied:
		den.Status, den.Reason, den.Decision = http.StatusServiceUnavailable, "rate_limiter_unavailable", hotlimit.Decision{}
	default:
		if s, ok := retryAfterSeconds(ev.Decision); ok {
			den.RetryAfter = s
			w.Header()["Retry-After"] = []string{strconv.FormatInt(s, 10)}
		}
	}
	if m.deny != nil {
		m.deny(w, r, den)
		return
	}
	writeDenial(w, den)
}

// denialBody is the default JSON body of a refused request.
type denialBody struct {
	Error      string `json:"error"`
	RetryAfter int64  `json:"retry_after,omitempty"`
}

func writeDenial(w http.ResponseWriter, d Denial) {
	body, _ := json.Marshal(denialBody{Error: d.Reason, RetryAfter: d.RetryAfter})
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(d.Status)
	w.Write(append(body, '\n'))
}
