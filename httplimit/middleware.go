package httplimit

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/hotlimit/hotlimit/admission"
)

// Middleware is rate-limiting net/http middleware: it puts each request
// in a route group, extracts the client's identities, asks a Backend to
// admit the request under the group's layer, the global layer and the
// identity layers, all or nothing, and either calls the next handler or
// refuses the request (429, or 403 when it can never pass). The decision
// is package admission's Pipeline, which grpclimit shares; the middleware
// adds the route groups and the HTTP answers. See the package
// documentation.
//
// Create it with New; it is safe for concurrent use. Close releases the
// backend.
type Middleware struct {
	pipe       *admission.Pipeline[*http.Request]
	groups     []groupState
	byName     map[string]int
	mux        *http.ServeMux // pattern → group; nil with classify
	byPattern  map[string]int
	classify   func(*http.Request) string
	defaultIdx int
	headers    HeaderMode
	reset      ResetMode
	problem    bool
	dryRun     bool
	hook       func(admission.Event)
	deny       func(http.ResponseWriter, *http.Request, Denial)
	version    string
	now        func() time.Time
	wait       func(context.Context, time.Duration) error
}

// New validates cfg, builds its backend, and returns the Middleware. The
// error names the offending field.
func New(cfg Config) (*Middleware, error) {
	if err := cfg.checkFields(); err != nil {
		return nil, err
	}
	m := newMiddleware(&cfg)
	m.newGroups(cfg.Groups)
	pc := admission.Config[*http.Request]{
		Prefix:           "httplimit",
		Noun:             "request",
		Limits:           cfg.Limits,
		Groups:           make([]admission.Group[*http.Request], len(cfg.Groups)),
		Key:              cfg.Key,
		Global:           cfg.Global,
		GlobalCost:       cfg.GlobalCost,
		ExemptIdentities: cfg.ExemptIdentities,
		Backend:          cfg.Backend,
		FailOpen:         cfg.FailOpen,
		DryRun:           cfg.DryRun,
		// Each layer's state: for the IETF fields, and for the limits a
		// refusal names (the problem body's, Denial.Policies).
		States:    m.problem || m.deny != nil || !m.dryRun && (m.headers == HeadersIETF || m.headers == HeadersBoth),
		Identify:  m.hook != nil || len(cfg.Observers) > 0,
		Observers: cfg.Observers,
	}
	if cfg.FallbackToIP {
		pc.Fallback = IPKey(cfg.ClientIP)
	}
	for i, g := range cfg.Groups {
		pc.Groups[i] = admission.Group[*http.Request]{Name: g.Name, Limit: g.Limit, Cost: g.Cost, Exempt: g.Exempt}
		if g.CostFunc != nil {
			pc.Groups[i].Price = m.groups[i].price
		}
	}
	for _, il := range cfg.Identities {
		layer := admission.IdentityLayer[*http.Request]{Limit: il.Limit, Key: il.Key, Cost: il.Cost}
		if il.FallbackToIP {
			layer.Fallback = IPKey(cfg.ClientIP)
		}
		pc.Identities = append(pc.Identities, layer)
	}
	// A nil Key or IdentityLimit.Key limits by the client IP: the
	// pipeline's own (ClientAddr), IPKey's identity, whose text a Local's
	// keys need not hold.
	c := cfg.ClientIP
	pc.ClientAddr = func(r *http.Request) (netip.Prefix, error) { return clientPrefix(c, r) }
	p, err := admission.New(pc)
	if err != nil {
		return nil, err
	}
	m.pipe = p
	if err := m.buildRoutes(cfg); err != nil {
		p.Close()
		return nil, err
	}
	return m, nil
}

// buildRoutes finds each request's group: by name, by pattern unless
// Config.Classify replaces them.
func (m *Middleware) buildRoutes(cfg Config) error {
	if err := m.buildGroups(cfg.Groups, cfg.DefaultGroup); err != nil {
		return err
	}
	if cfg.Classify == nil {
		return m.buildMux(cfg.Groups)
	}
	return nil
}

// newMiddleware copies the settings of a checked cfg that need no
// validation against other fields, applying their defaults.
func newMiddleware(cfg *Config) *Middleware {
	m := &Middleware{
		classify: cfg.Classify,
		headers:  cfg.Headers,
		reset:    cfg.Reset,
		problem:  cfg.ProblemDetails,
		dryRun:   cfg.DryRun,
		hook:     cfg.Hook,
		deny:     cfg.Deny,
		version:  cfg.PolicyVersion,
		now:      cfg.Now,
		wait:     cfg.Wait,
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.wait == nil {
		m.wait = waitTimer
	}
	return m
}

// Backend returns the backend the middleware decides through, such as a
// *Local whose limiters a metrics collector can read.
func (m *Middleware) Backend() admission.Backend { return m.pipe.Backend() }

// Close closes the backend if it has a Close method.
func (m *Middleware) Close() error { return m.pipe.Close() }

// Handler returns next wrapped in the rate limit.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	gi := m.group(r)
	g := &m.groups[gi]
	res := m.pipe.Decide(r.Context(), r, gi, g.cost)
	// The hook's Event in full only for a hook: the answer needs four
	// of its fields (a request without a hook would pay for the rest).
	var ev admission.Event
	if m.hook != nil {
		ev = res.Event()
	} else {
		ev.Outcome, ev.Refusal, ev.Decision, ev.Missing = res.Outcome, res.Refusal, res.Decision, res.Missing
	}
	var violated []string
	if res.Layers() > 0 && res.Outcome != admission.OutcomeErrorAllowed && res.Outcome != admission.OutcomeErrorDenied {
		if !m.dryRun && m.headers != HeadersNone {
			m.writeHeaders(w.Header(), gi, res)
		}
		if deniedByLimit(res.Outcome) && (m.problem || m.deny != nil) {
			violated = violatedLayers(res)
		}
	}
	m.pipe.Release(res)
	m.finish(w, r, next, g, &ev, violated)
}

// deniedByLimit reports whether o is a refusal by a limit: 429, or 403
// when the request can never pass.
func deniedByLimit(o admission.Outcome) bool {
	return o == admission.OutcomeDenied || o == admission.OutcomeDeniedNever
}

// finish counts, reports, and either serves the request or refuses it.
// violated names the limits a denied request exceeded, for the problem
// details body.
func (m *Middleware) finish(w http.ResponseWriter, r *http.Request, next http.Handler, g *groupState, ev *admission.Event, violated []string) {
	g.counts[ev.Outcome].Add(1)
	if m.hook != nil {
		ev.Context, ev.Method, ev.PolicyVersion, ev.Transport = r.Context(), r.Method, m.version, "http"
		m.hook(*ev)
	}
	if ev.Outcome.Passed() {
		// A dry run does not shape either: it changes nothing for the
		// client.
		if ev.Decision.Delay > 0 && ev.Outcome == admission.OutcomeAllowed && !m.dryRun {
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
	case m.problem && deniedByLimit(ev.Outcome):
		writeProblem(w, den)
	default:
		writeDenial(w, den)
	}
}

// violatedLayers returns the item names of the layers that refused res's
// request: those whose own state has fewer units than the request costs
// there, or, when the backend reported no states, the binding layer.
func violatedLayers(res *admission.Result) []string {
	if res.Layers() == 0 || res.Binding < 0 {
		return nil
	}
	var out []string
	for i := range res.Layers() {
		if it := res.Item(i); it.Known && it.Remaining < it.Cost {
			out = append(out, it.Name)
		}
	}
	if len(out) == 0 {
		out = append(out, res.Item(res.Binding).Name)
	}
	return out
}
