package hotlimitd

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"github.com/hotlimit/hotlimit/internal/wire"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// MaxDescriptors is the most descriptors a request may carry; a request
// with more is refused with InvalidArgument (Envoy sends one per
// rate_limits action that matched, a handful).
const MaxDescriptors = 64

// maxRetries bounds the decisions retried because a reload dropped a
// limit the request's configuration named.
const maxRetries = 3

// Options configure a Server. Config and Backend are required.
type Options struct {
	// Config returns the running configuration. It is called once per
	// request, so a request is decided under one configuration however
	// often it is reloaded (a config.Watcher's Current, an
	// atomic.Pointer's Load).
	Config func() *config.Config
	// Backend decides the layers. Its limits must be those of the
	// configuration (config.Config.Limits): hotlimitd/backend's Store
	// follows reloads; an admission.Local built from one configuration
	// serves that one only.
	Backend admission.Backend
	// Headers adds draft-11 RateLimit-Policy and RateLimit response
	// headers (and Retry-After to a refused request) to every response
	// that has an enforced limit.
	Headers bool
	// PartitionKeySecret keys the hash that the headers' pk parameters
	// are (see the package documentation): Servers given the same
	// secret, such as replicas behind one Envoy, give a limit's key the
	// same pk. Empty: a random secret per Server, so a key's pk holds for
	// the Server's lifetime only.
	PartitionKeySecret []byte
	// LimitHeaders, when not nil, adds envoyproxy/ratelimit's response
	// headers (its LIMIT_RESPONSE_HEADERS_ENABLED) to every response
	// with a limited descriptor, beside the draft-11 ones of Headers
	// (see the package documentation).
	LimitHeaders *LimitHeaders
	// FailOpen answers OK when the backend cannot decide; by default
	// (fail closed) the RPC fails with codes.Unavailable.
	FailOpen bool
	// Observers see each enforced decision (promlimit.BackendMetrics,
	// otellimit.Observer): see Server.
	Observers []admission.Observer
	// Tracer, when not nil, starts a span per ShouldRateLimit (see the
	// package documentation); nil traces nothing, at no cost.
	Tracer trace.Tracer
	// Propagator reads a request's trace context from its incoming gRPC
	// metadata, for Tracer's spans; nil is W3C Trace Context
	// (propagation.TraceContext).
	Propagator propagation.TextMapPropagator
	// Logger receives backend errors, at most one line a second (limit
	// names and the error, never a key or a descriptor value). nil logs
	// nothing.
	Logger *slog.Logger
}

// Server answers envoy.service.ratelimit.v3.RateLimitService's
// ShouldRateLimit under a configuration (config.Config) and a backend
// (admission.Backend). The package documentation gives its rules. It is
// safe for concurrent use.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer

	cfg       func() *config.Config
	backend   admission.Backend
	headers   bool
	pkSecret  [sha256.Size]byte // SHA-256 of Options.PartitionKeySecret, or random
	limitHdr  *LimitHeaders     // with the default names filled in; nil: none
	failOpen  bool
	observers []admission.Observer
	tracer    trace.Tracer
	prop      propagation.TextMapPropagator
	log       *slog.Logger
	lastLog   atomic.Int64         // unix nanoseconds of the last error line
	dropped   atomic.Int64         // error lines not written since
	calls     sync.Pool            // *call
	requests  sync.Pool            // *rlsv3.RateLimitRequest, Register's handler's
	info      grpc.UnaryServerInfo // what Register's handler tells an interceptor
	unary     grpc.UnaryHandler    // ShouldRateLimit, for an interceptor
	events    sync.Pool            // *observed

	overMu    sync.RWMutex
	overrides map[overrideID]*config.Limit // the descriptors' own limits, as the backend added them

	stats counters
}

// overrideID is a descriptor's own limit in a domain.
type overrideID struct {
	domain string
	rpu    uint32
	unit   config.Unit
}

// maxOverrides bounds the overrides a Server remembers; past it, each is
// made again (the backend holds at most its own number).
const maxOverrides = 1024

// A LimitAdder is a Backend that takes limits beyond the configuration's
// while it runs: a descriptor's own limit (see the package
// documentation) is added, once, before it is decided. hotlimitd/backend's
// Store is one. On a Backend that is not one, a descriptor with its own
// limit fails the request as the backend's error.
type LimitAdder interface {
	// AddLimit adds the limit name with policy p; adding it again with
	// the same policy does nothing.
	AddLimit(name string, p hotlimit.Policy) error
}

// errNoAdder is the error of a descriptor's own limit on a Backend that
// is not a LimitAdder.
var errNoAdder = errors.New("hotlimitd: the backend does not take a descriptor's own limit (not a LimitAdder)")

// override returns the limit of a descriptor's own limit in domain,
// added to the backend.
func (s *Server) override(domain string, o *rlv3.RateLimitDescriptor_RateLimitOverride) (*config.Limit, error) {
	id := overrideID{domain, o.GetRequestsPerUnit(), config.Unit(o.GetUnit())}
	s.overMu.RLock()
	l := s.overrides[id]
	s.overMu.RUnlock()
	if l != nil {
		return l, nil
	}
	l, err := config.Override(id.domain, id.rpu, id.unit)
	if err != nil {
		return nil, err // not reached: ShouldRateLimit checked the unit
	}
	if l.Policy != nil {
		a, ok := s.backend.(LimitAdder)
		if !ok {
			return nil, errNoAdder
		}
		if err := a.AddLimit(l.Name, l.Policy); err != nil {
			return nil, err
		}
	}
	s.overMu.Lock()
	if prev := s.overrides[id]; prev != nil {
		l = prev
	} else if len(s.overrides) < maxOverrides {
		if s.overrides == nil {
			s.overrides = map[overrideID]*config.Limit{}
		}
		s.overrides[id] = l
	}
	s.overMu.Unlock()
	return l, nil
}

// New returns a Server for opts.
func New(opts Options) (*Server, error) {
	if opts.Config == nil {
		return nil, errors.New("hotlimitd: Options.Config is nil")
	}
	if opts.Backend == nil {
		return nil, errors.New("hotlimitd: Options.Backend is nil")
	}
	s := &Server{cfg: opts.Config, backend: opts.Backend, headers: opts.Headers, failOpen: opts.FailOpen, log: opts.Logger}
	if len(opts.PartitionKeySecret) > 0 { // an empty one would be a secret everyone knows
		s.pkSecret = sha256.Sum256(opts.PartitionKeySecret)
	} else {
		rand.Read(s.pkSecret[:]) // never fails (crypto/rand)
	}
	if h := opts.LimitHeaders; h != nil {
		s.limitHdr = &LimitHeaders{Limit: cmp.Or(h.Limit, DefaultLimitHeader), Remaining: cmp.Or(h.Remaining, DefaultRemainingHeader), Reset: cmp.Or(h.Reset, DefaultResetHeader)}
	}
	for _, o := range opts.Observers {
		if o != nil {
			s.observers = append(s.observers, o)
		}
	}
	if opts.Tracer != nil {
		s.tracer, s.prop = opts.Tracer, opts.Propagator
		if s.prop == nil {
			s.prop = propagation.TraceContext{}
		}
	}
	s.calls.New = func() any { return new(call) }
	s.info = grpc.UnaryServerInfo{Server: s, FullMethod: rlsv3.RateLimitService_ShouldRateLimit_FullMethodName}
	s.unary = func(ctx context.Context, req any) (any, error) {
		return s.ShouldRateLimit(ctx, req.(*rlsv3.RateLimitRequest))
	}
	s.events.New = func() any { return new(observed) }
	return s, nil
}

// Register registers s on g as the RateLimitService. Its requests are
// pooled: a request (the *rlsv3.RateLimitRequest a unary interceptor of
// g is handed) is reused once its call returns, so an interceptor must
// not keep it, or anything it points at, past the call.
func (s *Server) Register(g *grpc.Server) { g.RegisterService(&serviceDesc, s) }

// descriptor kinds, per descriptor of a request.
const (
	kindNone      uint8 = iota // no rule matched: OK, no limit
	kindUnlimited              // an unlimited rule: OK, no limit
	kindEnforced               // decided with the request's other enforced descriptors
	kindShadow                 // decided on its own, never refuses
	kindChecked                // hits 0 on a rule that refuses every hit: OK, nothing left, no backend
)

// call is one request's scratch space, pooled.
type call struct {
	entries []config.Entry
	keys    []byte
	kind    []uint8
	lims    []*config.Limit
	ends    []int   // descriptor i's key is keys[ends[i-1]:ends[i]] (ends[-1] = 0)
	costs   []int64 // descriptor i's cost in its limit's units
	layer   []int   // descriptor i's index in layers (enforced) or -1
	over    []bool
	layers  []admission.Layer
	states  []hotlimit.LayerState
	hdr     []byte        // the response headers, being written
	pkIn    []byte        // the partition key hash's input, being written
	pks     [][pkLen]byte // layer j's partition key
	one     [1]admission.Layer
	oneSt   [1]hotlimit.LayerState
	obs     observation // the enforced decision, for the observers
}

// observation is what the observers are told of a request's enforced
// decision, once the request is answered (a decision retried after a
// reload is told once, as answered).
type observation struct {
	asked   bool // the backend was asked
	dec     hotlimit.Decision
	binding int
	err     error
	refuse  bool
	took    time.Duration
}

// maxPooled is the most bytes of entries, keys or headers a pooled call
// keeps for the next request: a request with a huge descriptor (gRPC
// takes messages up to 4 MiB) must not pin its buffers in the pool.
const maxPooled = 64 << 10

// release hands c back to the pool, without the configuration's limits
// and without buffers beyond maxPooled.
func (s *Server) release(c *call) {
	clear(c.lims)
	if cap(c.entries)*32 > maxPooled { // an Entry is two strings: 32 bytes on 64-bit

		c.entries = nil
	}
	if cap(c.keys) > maxPooled {
		c.keys = nil
	}
	if cap(c.hdr) > maxPooled {
		c.hdr = nil
	}
	if cap(c.pkIn) > maxPooled {
		c.pkIn = nil
	}
	s.calls.Put(c)
}

// reset sizes c for n descriptors.
func (c *call) reset(n int) {
	c.keys = c.keys[:0]
	c.kind = grow(c.kind, n)
	c.lims = grow(c.lims, n)
	c.ends = grow(c.ends, n)
	c.costs = grow(c.costs, n)
	c.layer = grow(c.layer, n)
	c.over = grow(c.over, n)
	clear(c.lims) // keep no config alive in the pool
	c.layers = c.layers[:0]
	c.obs = observation{}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// ShouldRateLimit implements rlsv3.RateLimitServiceServer: see the
// package documentation.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if s.tracer == nil {
		return s.shouldRateLimit(ctx, req)
	}
	return s.traced(ctx, req)
}

// spanName is the name of ShouldRateLimit's spans: the RPC's, as
// OpenTelemetry's RPC conventions name a server span.
const spanName = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// traced is ShouldRateLimit in a span whose parent is the trace context
// of the request's gRPC metadata, if any.
func (s *Server) traced(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = s.prop.Extract(ctx, mdCarrier(md))
	}
	ctx, span := s.tracer.Start(ctx, spanName, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("rpc.system", "grpc"),
		attribute.String("hotlimitd.domain", req.GetDomain()),
		attribute.Int("hotlimitd.descriptors", len(req.GetDescriptors())),
	))
	defer span.End()
	resp, err := s.shouldRateLimit(ctx, req)
	if err != nil {
		st, _ := status.FromError(err)
		span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(st.Code())))
		span.SetStatus(otelcodes.Error, st.Message())
		return nil, err
	}
	span.SetAttributes(attribute.String("hotlimitd.overall_code", resp.OverallCode.String()))
	return resp, nil
}

// mdCarrier is gRPC metadata as a propagation.TextMapCarrier (its keys
// are lower case, as the propagators ask for them).
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// shouldRateLimit is ShouldRateLimit without a span.
func (s *Server) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		s.stats.invalid.Add(1)
		return nil, status.Error(codes.InvalidArgument, "hotlimitd: the request has no domain")
	}
	n := len(req.GetDescriptors())
	if n == 0 || n > MaxDescriptors {
		s.stats.invalid.Add(1)
		return nil, status.Errorf(codes.InvalidArgument, "hotlimitd: the request has %d descriptors, want 1 to %d", n, MaxDescriptors)
	}
	for i, d := range req.Descriptors {
		if o := d.GetLimit(); o != nil && config.Unit(o.GetUnit()).Duration() == 0 {
			s.stats.invalid.Add(1)
			return nil, status.Errorf(codes.InvalidArgument, "hotlimitd: descriptor %d's limit has unit %v, want SECOND to WEEK", i, o.GetUnit())
		}
	}
	c := s.calls.Get().(*call)
	defer s.release(c)
	cfg := s.cfg()
	resp, err := s.decide(ctx, c, cfg, req)
	// A reload that landed between reading the configuration and asking
	// the backend can have dropped a limit the configuration names (the
	// backend already serves the new ones): decide again under the new
	// configuration. Nothing was decided under the old one (the backend
	// refuses a request naming an unknown limit as a whole). Each retry
	// needs another reload to have completed meanwhile; after
	// maxRetries the request fails as the backend's error.
	for try := 0; try < maxRetries && err != nil && errors.Is(err, admission.ErrUnknownLimit); try++ {
		next := s.cfg()
		if next == cfg {
			break
		}
		cfg = next
		resp, err = s.decide(ctx, c, cfg, req)
	}
	if o := &c.obs; o.asked {
		s.observe(ctx, c, req.Domain, o.dec, o.binding, o.err, o.refuse, o.took)
		*o = observation{}
	}
	if err != nil {
		return s.failed(req, err)
	}
	return resp, nil
}

// failed answers a request the backend could not decide.
func (s *Server) failed(req *rlsv3.RateLimitRequest, err error) (*rlsv3.RateLimitResponse, error) {
	s.logError(err)
	if !s.failOpen {
		s.stats.failedClosed.Add(1)
		return nil, status.Error(codes.Unavailable, "hotlimitd: the rate limit backend could not decide")
	}
	s.stats.failedOpen.Add(1)
	b := newResponse(len(req.Descriptors))
	b.resp.OverallCode = rlsv3.RateLimitResponse_OK
	for i := range b.parts {
		b.parts[i].st.Code = rlsv3.RateLimitResponse_OK
	}
	return b.resp, nil
}

// decide decides req under cfg. An error is the backend's, for the
// enforced descriptors (nothing was decided).
func (s *Server) decide(ctx context.Context, c *call, cfg *config.Config, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	descs := req.Descriptors
	c.reset(len(descs))
	if err := s.resolve(c, cfg, req); err != nil {
		return nil, err
	}
	refuse := c.price(descs, max(1, uint64(req.HitsAddend))) // Envoy: a request's unset (0) hits_addend is 1
	all := string(c.keys)                                    // the one allocation of the keys
	c.enforce(all, refuse)
	var (
		dec     hotlimit.Decision
		binding = -1
	)
	admitted := true
	if len(c.layers) > 0 {
		var err error
		if dec, binding, err = s.ask(ctx, c, refuse); err != nil {
			return nil, err
		}
		admitted = dec.Allowed && !refuse
	}
	if refuse {
		admitted = false
	}
	b := newResponse(len(descs))
	resp := b.resp
	resp.OverallCode = rlsv3.RateLimitResponse_OK
	if !admitted {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		s.stats.overLimit.Add(1)
	} else {
		s.stats.ok.Add(1)
	}
	for i := range descs {
		s.status(ctx, b, c, i, all, dec, binding, admitted)
	}
	if s.headers && len(c.layers) > 0 {
		retry := dec.RetryAfter
		if refuse {
			retry = hotlimit.Never // a rule that refuses every hit: never passes
		}
		resp.ResponseHeadersToAdd = s.headerValues(c, retry, admitted)
	}
	if s.limitHdr != nil {
		resp.ResponseHeadersToAdd = s.limitHdr.add(resp.ResponseHeadersToAdd, resp.Statuses)
	}
	return resp, nil
}

// resolve finds each descriptor's limit under cfg (its own limit, added
// to the backend, or its rule's) into c.lims, and its key into c.keys
// (ending at c.ends[i]); a replaced limit is dropped. An error is the
// backend's, adding a descriptor's own limit.
func (s *Server) resolve(c *call, cfg *config.Config, req *rlsv3.RateLimitRequest) error {
	for i, d := range req.Descriptors {
		c.kind[i], c.layer[i], c.costs[i] = kindNone, -1, 0
		var (
			l  *config.Limit
			ok bool
		)
		if o := d.GetLimit(); o != nil && cfg != nil && cfg.HasDomain(req.Domain) {
			if ok = c.entriesOf(d); ok {
				var err error
				if l, err = s.override(req.Domain, o); err != nil {
					return err
				}
				c.keys = config.OverrideKey(c.keys, c.entries)
			}
		} else {
			l, ok = c.match(cfg, req.Domain, d)
		}
		c.ends[i] = len(c.keys)
		if ok {
			c.lims[i] = l
		}
	}
	config.DropReplaced(c.lims) // a replaced limit is not decided: OK, no limit
	return nil
}

// price sets each limited descriptor's kind and cost (its limit's cost
// times its hits: its own hits_addend when set, else reqHits), and
// reports whether an enforced rule of requests_per_unit 0 refuses the
// request.
func (c *call) price(descs []*rlv3.RateLimitDescriptor, reqHits uint64) (refuse bool) {
	for i, d := range descs {
		l := c.lims[i]
		switch {
		case l == nil:
			continue
		case l.Unlimited:
			c.kind[i] = kindUnlimited
			continue
		case l.Shadow:
			c.kind[i] = kindShadow
		default:
			c.kind[i] = kindEnforced
		}
		hits := reqHits
		if h := d.GetHitsAddend(); h != nil {
			hits = h.GetValue() // set, it overrides the request's: 0 is a check
		}
		cost := mulCost(l.Cost, hits)
		if d.GetIsNegativeHits() {
			cost = 0 // a give-back is not supported: peek instead
		}
		c.costs[i] = cost
		if hits == 0 && l.Refuses() && !c.tooLong(i) {
			// envoyproxy/ratelimit's check is "the count after the hits
			// is over the limit": 0 hits are not over 0 (1 negative hit,
			// which it consumes, is), nor, in shadow mode, a would-be
			// refusal.
			c.kind[i] = kindChecked
			continue
		}
		if c.kind[i] != kindEnforced {
			continue
		}
		refuse = refuse || c.refuses(i)
	}
	return refuse
}

// enforce makes the backend's layers of the enforced descriptors that the
// backend decides (each at its cost, or 0 when the request is refused
// anyway: only read the state, for the status), with c.layer[i] each
// one's index; all is c.keys as a string.
func (c *call) enforce(all string, refuse bool) {
	for i, k := range c.kind {
		if k != kindEnforced || c.refuses(i) {
			continue
		}
		cost := c.costs[i]
		if refuse {
			cost = 0
		}
		c.layer[i] = len(c.layers)
		c.layers = append(c.layers, admission.Layer{Limit: c.lims[i].Name, Key: c.key(all, i), Cost: cost})
	}
}

// ask asks the backend about c.layers (at least one), records the
// observation, and marks the descriptors over the limit. An error is
// returned only when the request is not refused anyway (refuse); then
// it stands refused, with every state unknown.
func (s *Server) ask(ctx context.Context, c *call, refuse bool) (hotlimit.Decision, int, error) {
	c.states = grow(c.states, len(c.layers))
	var began time.Time
	if s.observers != nil {
		began = time.Now()
	}
	dec, binding, err := s.backend.AllowStates(ctx, c.layers, c.states)
	if s.observers != nil {
		c.obs = observation{asked: true, dec: dec, binding: binding, err: err, refuse: refuse, took: time.Since(began)}
	}
	if err != nil && !refuse {
		return dec, binding, err
	}
	if err != nil {
		// Refused without the backend all the same: the others'
		// states, which were only read, are unknown.
		s.logError(err)
		dec, binding = hotlimit.Decision{RetryAfter: hotlimit.Never}, -1
		for j := range c.states {
			c.states[j] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: -1}, Next: hotlimit.Never}
		}
	}
	s.markOver(c, dec, binding, refuse)
	return dec, binding, nil
}

// status fills descriptor i's status in b from the decision.
func (s *Server) status(ctx context.Context, b response, c *call, i int, all string, dec hotlimit.Decision, binding int, admitted bool) {
	st := &b.parts[i].st
	st.Code = rlsv3.RateLimitResponse_OK
	switch c.kind[i] {
	case kindUnlimited:
		st.LimitRemaining = math.MaxUint32
	case kindEnforced:
		j := c.layer[i]
		if j < 0 { // refused without the backend (refuses)
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			b.fill(i, c.lims[i], hotlimit.LayerState{Next: hotlimit.Never})
			return
		}
		ls := c.states[j]
		if ls.Decision.Remaining < 0 { // the backend cannot tell the layer's state
			ls.Next = hotlimit.Never
			if j == binding {
				ls.Decision.Remaining = dec.Remaining // it told the binding layer's only
			}
		}
		if c.over[i] {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		b.fill(i, c.lims[i], ls)
	case kindShadow:
		s.shadow(ctx, b, c, i, all, admitted)
	case kindChecked:
		b.fill(i, c.lims[i], hotlimit.LayerState{Next: hotlimit.Never})
	}
}

// match finds d's rule in cfg, appending its key to c.keys.
func (c *call) match(cfg *config.Config, domain string, d *rlv3.RateLimitDescriptor) (*config.Limit, bool) {
	if cfg == nil || !c.entriesOf(d) {
		return nil, false
	}
	start := len(c.keys)
	l, key, ok := cfg.Match(c.keys, domain, c.entries)
	if !ok || l == nil {
		c.keys = c.keys[:start]
		return nil, false
	}
	c.keys = key
	return l, true
}

// entriesOf sets c.entries to d's entries; false when d has none, or a
// nil one (no limit).
func (c *call) entriesOf(d *rlv3.RateLimitDescriptor) bool {
	es := d.GetEntries()
	if len(es) == 0 {
		return false
	}
	c.entries = c.entries[:0]
	for _, e := range es {
		if e == nil {
			return false
		}
		c.entries = append(c.entries, config.Entry{Key: e.Key, Value: e.Value})
	}
	return true
}

// refuses reports whether descriptor i is refused without a backend: its
// rule refuses every hit, or its key is longer than hotlimit.MaxKeyLen
// (which no limiter keeps state for: every backend denies it for good).
func (c *call) refuses(i int) bool { return c.lims[i].Refuses() || c.tooLong(i) }

// tooLong reports whether descriptor i's key is longer than
// hotlimit.MaxKeyLen.
func (c *call) tooLong(i int) bool {
	start := 0
	if i > 0 {
		start = c.ends[i-1]
	}
	return c.ends[i]-start > hotlimit.MaxKeyLen
}

// key returns descriptor i's key, a slice of all (c.keys as a string).
func (c *call) key(all string, i int) string {
	start := 0
	if i > 0 {
		start = c.ends[i-1]
	}
	return all[start:c.ends[i]]
}

// mulCost returns cost×hits, saturating at math.MaxInt64: a cost beyond
// any capacity, which every algorithm refuses for good (RetryAfter
// Never), never one that wrapped around.
func mulCost(cost int64, hits uint64) int64 {
	if cost <= 0 {
		return 0
	}
	if hits > uint64(math.MaxInt64/cost) {
		return math.MaxInt64
	}
	return cost * int64(hits)
}

// satAdd returns a+b for a, b ≥ 0, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// markOver sets c.over for each enforced descriptor the backend decided:
// none when the request was admitted; when the backend refused it, each
// whose own state has fewer units than it costs, and the binding one (a
// refused request always has one: the binding layer, or, when the
// backend does not say, every enforced descriptor); when a rule that
// refuses every hit refused it (refuse: the others were only read),
// each whose own state has fewer units than it costs. Descriptors that
// share a limit and a key are one limit: each of them is over when their
// summed cost is more than its state has, or when one of them is the
// binding one.
func (s *Server) markOver(c *call, dec hotlimit.Decision, binding int, refuse bool) {
	clear(c.over)
	if dec.Allowed && !refuse {
		return
	}
	any := false
	for i, j := range c.layer {
		if j < 0 {
			continue
		}
		bind, need := false, int64(0)
		for k, m := range c.layer { // at most MaxDescriptors², on refusals only
			if m >= 0 && c.layers[m].Limit == c.layers[j].Limit && c.layers[m].Key == c.layers[j].Key {
				bind = bind || m == binding
				need = satAdd(need, c.costs[k])
			}
		}
		if (bind && !refuse) || (c.states[j].Decision.Remaining >= 0 && c.states[j].Decision.Remaining < need) {
			c.over[i], any = true, true
		}
	}
	if !any && !refuse {
		for i, j := range c.layer {
			c.over[i] = j >= 0
		}
	}
}

// shadow decides shadow descriptor i on its own: for its cost when the
// enforced descriptors admitted the request, else for 0 (a peek: a
// refused request does not reach the service, so it is not counted). Its
// status is OK; a would-be refusal is counted in Stats.ShadowOverLimit.
func (s *Server) shadow(ctx context.Context, b response, c *call, i int, all string, admitted bool) {
	if c.refuses(i) {
		s.stats.shadowOverLimit.Add(1)
		b.fill(i, c.lims[i], hotlimit.LayerState{Next: hotlimit.Never})
		return
	}
	cost := c.costs[i]
	if !admitted {
		cost = 0
	}
	c.one[0] = admission.Layer{Limit: c.lims[i].Name, Key: c.key(all, i), Cost: cost}
	d, _, err := s.backend.AllowStates(ctx, c.one[:], c.oneSt[:])
	c.one[0] = admission.Layer{}
	if err != nil {
		s.logError(err)
		s.stats.shadowErrors.Add(1)
		return // OK, without a limit: nothing was decided
	}
	if !d.Allowed {
		s.stats.shadowOverLimit.Add(1)
	}
	ls := c.oneSt[0]
	if ls.Decision.Remaining < 0 { // the backend cannot tell: its decision's
		ls.Decision.Remaining, ls.Next = d.Remaining, hotlimit.Never
	}
	b.fill(i, c.lims[i], ls)
}

// headerValues returns the RateLimit-Policy and RateLimit headers of the
// enforced descriptors, one item each, named after its limit and with
// its key's partition key (pk), and Retry-After when the request was
// refused and can pass later, all from the decision.
func (s *Server) headerValues(c *call, retryAfter time.Duration, admitted bool) []*corev3.HeaderValue {
	c.pks = grow(c.pks, len(c.layers))
	for j := range c.layers {
		c.pks[j] = s.partitionKey(c, c.layers[j].Key)
	}
	// Both fields (and Retry-After) are written into c.hdr and become one
	// string, cut in three.
	b := c.hdr[:0]
	n := 0
	for i, j := range c.layer {
		if j < 0 {
			continue
		}
		if n > 0 {
			b = append(b, ", "...)
		}
		n++
		l, pi := c.lims[i], c.states[j].Policy
		if pi.Algorithm == 0 {
			pi, _ = hotlimit.Describe(l.Policy) // the backend does not say: the configured one
		}
		b = wire.AppendPolicyItem(b, sfString(l.Name), pi)
		b = appendPK(b, &c.pks[j])
	}
	policyEnd := len(b)
	n = 0
	for i, j := range c.layer {
		if j < 0 {
			continue
		}
		if n > 0 {
			b = append(b, ", "...)
		}
		n++
		r, w := c.states[j].Decision.Remaining, c.states[j].Next
		if r < 0 {
			r, w = 0, hotlimit.Never // unknown: r=0, no t
		}
		b = wire.AppendItem(b, sfString(c.lims[i].Name), r, w)
		b = appendPK(b, &c.pks[j])
	}
	rlEnd := len(b)
	retry := !admitted && retryAfter != hotlimit.Never
	if retry {
		b = strconv.AppendInt(b, max(1, wire.CeilSeconds(retryAfter)), 10)
	}
	c.hdr = b
	hdr := string(b)
	h := new(struct {
		ptrs [3]*corev3.HeaderValue
		vs   [3]corev3.HeaderValue
	})
	h.vs[0].Key, h.vs[0].Value = "RateLimit-Policy", hdr[:policyEnd]
	h.vs[1].Key, h.vs[1].Value = "RateLimit", hdr[policyEnd:rlEnd]
	h.vs[2].Key, h.vs[2].Value = "Retry-After", hdr[rlEnd:]
	for i := range h.ptrs {
		h.ptrs[i] = &h.vs[i]
	}
	if retry {
		return h.ptrs[:3]
	}
	return h.ptrs[:2]
}

// pkLen is the length in bytes of a partition key: 64 bits, so that two
// keys a client sees share one with a chance of about n²/2⁶⁵.
const pkLen = 8

// partitionKey returns the partition key of a limit's key: the first
// pkLen bytes of SHA-256(s.pkSecret ‖ key). Without the secret, it tells
// nothing of key (a client can neither compute it nor test a guessed
// descriptor value against it); with it, equal keys have equal partition
// keys. The limit is not hashed in: the item's name gives it.
func (s *Server) partitionKey(c *call, key string) [pkLen]byte {
	c.pkIn = append(append(c.pkIn[:0], s.pkSecret[:]...), key...)
	sum := sha256.Sum256(c.pkIn)
	return [pkLen]byte(sum[:pkLen])
}

// appendPK appends the pk parameter of pk, an RFC 9651 Byte Sequence.
func appendPK(b []byte, pk *[pkLen]byte) []byte {
	b = append(b, ";pk=:"...)
	b = base64.StdEncoding.AppendEncode(b, pk[:])
	return append(b, ':')
}

// sfString returns name as the body of an RFC 9651 sf-string, with the
// double quote and the backslash escaped. A limit's Name is otherwise
// printable ASCII (config escapes the rest), which an sf-string takes as
// it is.
func sfString(name string) string {
	if !strings.ContainsAny(name, `"\`) {
		return name
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name)
}

// logError writes err at most once a second.
func (s *Server) logError(err error) {
	if s.log == nil {
		return
	}
	now := time.Now().UnixNano()
	last := s.lastLog.Load()
	if now-last < int64(time.Second) || !s.lastLog.CompareAndSwap(last, now) {
		s.dropped.Add(1)
		return
	}
	s.log.Warn("rate limit backend error", "err", err.Error(), "suppressed", s.dropped.Swap(0))
}
