package admission

import (
	"context"
	"time"

	"github.com/hotlimit/hotlimit"
)

// An Observer sees every decision a Pipeline's backend makes or fails to
// make, for metrics and traces: promlimit's and otellimit's observers
// time the backend and record the capacity left, and otellimit's can
// trace the backend's work in a span of its own. Both methods are called
// synchronously, on the request's goroutine; they must be fast and safe
// for concurrent use, and must not keep ev.
type Observer interface {
	// Begin is called right before the backend is asked, with the
	// request's Event as far as it is known: its Group, Limit and
	// Algorithm, and a Result whose layers (Layers, Item's Name and
	// Cost) and identity are set, but no decision yet. It returns the
	// context the backend decides under: ctx, or one carrying a span
	// that encloses the backend's own work. The observers' Begin are
	// called in Config.Observers order, each given the context the one
	// before returned.
	Begin(ctx context.Context, ev *Event) context.Context
	// Observe is called after the backend returned, with the context
	// the last Begin returned and the Event complete. (A service that
	// reports decisions it made without a Pipeline, as hotlimitd does,
	// calls Observe alone: there is no backend call of its own to
	// enclose.)
	Observe(ctx context.Context, ev *Event)
}

// Event describes one request's decision, the same for every transport:
// what an Observer is handed around the backend's call, and what
// httplimit's and grpclimit's Config.Hook receive once the request is
// decided. It holds no key and no identity: bounded names only, so that
// a hook can label metrics with them.
type Event struct {
	// Context is the request's context: an HTTP request's, a gRPC
	// call's server context (its peer, its metadata, its span). It
	// carries the client's credentials: log fields of it, never its
	// metadata wholesale. Observers get it as their ctx argument too.
	Context context.Context
	// Method is what the transport was asked: the HTTP request's method
	// ("GET"), the gRPC call's full method ("/pkg.Service/Method"). ""
	// in an Observer's Event.
	Method string
	// Group is the request's group (an HTTP route group, a gRPC method
	// group), and GroupLimit its layer's limit, the first layer's, with
	// GroupAlgorithm that limit's algorithm as Config.Limits gives it
	// ("TokenBucket", ...); both "" for an exempt group.
	Group, GroupLimit, GroupAlgorithm string
	// Outcome is what the pipeline decided, and Refusal what refused the
	// request, or, under DryRun, what would have (Result.Refusal).
	Outcome, Refusal Outcome
	// IdentityHash and IdentityKind describe the request's identity
	// (Result.IdentityHash, Result.IdentityKind): a seeded hash,
	// meaningless outside the pipeline, and its kind ("tok", "ip", an
	// application kind); 0 and "" without a key or without
	// Config.Identify.
	IdentityHash uint64
	IdentityKind string
	// Fallback reports that a layer's key came from its Fallback.
	Fallback bool
	// Missing names the layer whose identity could not be extracted
	// (Result.Missing).
	Missing string
	// Limit and Algorithm describe the binding limit: the one that
	// refused the request or, admitted, the one with the fewest requests
	// left (Result.Limit); "" without a decision (exempt, key, cost and
	// backend failures, and in Begin).
	Limit, Algorithm string
	// PolicyVersion is the transport's Config.PolicyVersion ("" in an
	// Observer's Event).
	PolicyVersion string
	// Transport names the transport that decided the request: "http"
	// (httplimit), "grpc" (grpclimit), or what another transport that
	// completes the Event calls itself; "" in an Observer's Event. An
	// observer that labels metrics by transport reads it.
	Transport string
	// Decision is the backend's decision (zero when there was none), and
	// Err the key extraction, pricing or backend error, if any.
	Decision hotlimit.Decision
	Err      error
	// Duration is how long the backend took to decide (a Redis round
	// trip included); measured only for a Pipeline with Observers, 0
	// otherwise.
	Duration time.Duration
	// Result is the request's Result, for an Observer (its layers: Item
	// gives each one's name and state); nil in a Hook's Event, which
	// outlives it.
	Result *Result
}

// Event returns the Event of res: what a transport hands its hook once
// it adds Context, Method, PolicyVersion and Transport. Result is nil.
func (res *Result) Event() Event {
	ev := Event{
		Group: res.group, Outcome: res.Outcome, Refusal: res.Refusal,
		IdentityHash: res.IdentityHash, IdentityKind: res.IdentityKind, Fallback: res.Fallback, Missing: res.Missing,
		Decision: res.Decision, Err: res.Err, Duration: res.took,
	}
	if res.glimit != nil {
		ev.GroupLimit, ev.GroupAlgorithm = res.glimit.name, res.glimit.Algorithm.String()
	}
	if res.nlayers > 0 {
		ev.Limit, ev.Algorithm = res.Limit()
	}
	return ev
}

// begin tells the observers that the backend is about to decide res and
// returns the context it decides under.
func (p *Pipeline[R]) begin(ctx context.Context, res *Result) context.Context {
	res.ev = res.Event()
	res.ev.Context, res.ev.Result = ctx, res
	for _, o := range p.observers {
		ctx = o.Begin(ctx, &res.ev)
	}
	return ctx
}

// observe reports the backend's decision on res, begun at began, to the
// observers (after begin).
func (p *Pipeline[R]) observe(ctx context.Context, res *Result, began time.Time) {
	if p.observers == nil {
		return
	}
	res.took = time.Since(began)
	outer := res.ev.Context
	res.ev = res.Event()
	res.ev.Context, res.ev.Result = outer, res
	for _, o := range p.observers {
		o.Observe(ctx, &res.ev)
	}
	res.ev = Event{}
}
