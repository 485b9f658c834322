package grpclimit

import (
	"context"
	"strconv"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/wire"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The response metadata keys (see the package documentation).
const (
	MDLimit      = "ratelimit-limit"     // the binding limit's capacity, Decision.Limit
	MDRemaining  = "ratelimit-remaining" // Decision.Remaining
	MDName       = "ratelimit-name"      // the binding limit's name in Config.Limits
	MDRetryAfter = "retry-after"         // whole seconds, rounded up, on a denial that can pass later
	// MDPolicy and MDLayers describe every layer of a call, with
	// Config.Identities: one item per layer, exactly as the HTTP
	// RateLimit-Policy and RateLimit fields write them
	// (`"per-token";q=1000;w=60, "per-ip";q=100;w=60` and
	// `"per-token";r=993;t=12, "per-ip";r=41;t=12`), so that each limit
	// a call is checked against has its own quota metadata.
	MDPolicy = "ratelimit-policy"
	MDLayers = "ratelimit"
	// MDPushback is the trailer grpc-go's own retries obey (gRPC's
	// retry design, A6): on a refusal that can pass later, the wait in
	// milliseconds, rounded up; on one that never can, "-1", which tells
	// the client not to retry.
	MDPushback = "grpc-retry-pushback-ms"
)

// The errdetails.ErrorInfo reasons of the calls the interceptor refuses,
// in domain ErrorDomain.
const (
	ErrorDomain = "hotlimit"
	// ReasonExceeded: the quota is used up; RetryInfo says when the same
	// call passes.
	ReasonExceeded = "RATE_LIMIT_EXCEEDED"
	// ReasonNever: the call can never pass (its cost exceeds the limit's
	// capacity); there is no RetryInfo, and retrying is pointless.
	ReasonNever = "RATE_LIMIT_NEVER"
	// ReasonKeyMissing: no key could be extracted (and no
	// Config.FallbackToIP). The
	// ErrorInfo's metadata entry "missing" names the layer whose
	// identity the call lacks, by its limit's name (the layer's item
	// name in MDLayers), never by the identity: the group's limit when
	// Config.Key found none, an IdentityLimit's when its Key found none.
	ReasonKeyMissing = "RATE_LIMIT_KEY_MISSING"
	// ReasonUnavailable: the backend failed (without Config.FailOpen), with
	// codes.Unavailable.
	ReasonUnavailable = "RATE_LIMITER_UNAVAILABLE"
)

// Unary returns the unary server interceptor. Install it with
// grpc.ChainUnaryInterceptor, after authentication if Key reads a
// credential.
func (ic *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, err := ic.admit(ctx, info.FullMethod)
		if md != nil {
			// It fails only if an earlier interceptor already sent the
			// headers; the metadata is then lost, not the decision.
			if err != nil {
				_ = grpc.SetTrailer(ctx, md)
			} else {
				_ = grpc.SetHeader(ctx, md)
			}
		}
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor. A stream is limited once,
// when it opens, at its method's cost; its messages are not counted.
func (ic *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, err := ic.admit(ss.Context(), info.FullMethod)
		if md != nil {
			if err != nil {
				ss.SetTrailer(md)
			} else {
				_ = ss.SetHeader(md)
			}
		}
		if err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// Limit decides the call whose server context is ctx, sets the rate-limit
// metadata on its response header, and returns nil when the call may go
// on, or the status error Unary would return. It makes an Interceptor a
// go-grpc-middleware v2 ratelimit.Limiter:
//
//	ratelimit.UnaryServerInterceptor(ic)
//
// That interceptor replaces the error with a ResourceExhausted status of
// its own message, dropping the details (RetryInfo, ErrorInfo); the
// metadata, retry-after included, still reaches the client. The method is
// read with grpc.Method(ctx); a context without one is in
// Config.DefaultGroup.
func (ic *Interceptor) Limit(ctx context.Context) error {
	method, _ := grpc.Method(ctx)
	md, err := ic.admit(ctx, method)
	if md != nil {
		if err != nil {
			_ = grpc.SetTrailer(ctx, md)
		} else {
			_ = grpc.SetHeader(ctx, md)
		}
	}
	return err
}

// admit decides the call and, when a LeakyBucket admitted it with a
// Delay, waits it out. It returns the response metadata (nil for none)
// and the status error to refuse the call with. The metadata of a
// refusal goes in the trailers: a response that sends headers is not
// retried by gRPC clients, whatever their retry policy.
func (ic *Interceptor) admit(ctx context.Context, method string) (metadata.MD, error) {
	md, delay, err := ic.decide(ctx, method)
	if err == nil && delay > 0 {
		if werr := ic.wait(ctx, delay); werr != nil {
			err = status.FromContextError(werr).Err()
		}
	}
	return md, err
}

// decide asks the pipeline, builds the answer and reports it to the
// hook.
func (ic *Interceptor) decide(ctx context.Context, method string) (metadata.MD, time.Duration, error) {
	gi := ic.groupOf(method)
	g := &ic.groups[gi]
	cost := g.cost
	if g.costs != nil {
		if c, ok := g.costs[method]; ok {
			cost = c
		}
	}
	res := ic.pipe.Decide(ctx, ctx, gi, cost)
	defer ic.pipe.Release(res)
	if res.KeyErr != nil && ic.onError != nil {
		ic.onError(ctx, method, res.KeyErr)
	}
	switch res.Outcome {
	case admission.OutcomeExempt:
		ic.report(ctx, method, res)
		return nil, 0, nil
	case admission.OutcomeKeyDenied:
		ic.report(ctx, method, res)
		// The KeyFunc's error stays on the server: it may describe the
		// configuration, which is no business of the client's.
		// The ErrorInfo names the layer whose identity is missing (its
		// limit's name), never the identity.
		return pushback(nil, hotlimit.Never), 0, refusalInfo(codes.ResourceExhausted, "grpclimit: the call has no rate-limit key",
			&errdetails.ErrorInfo{Reason: ReasonKeyMissing, Domain: ErrorDomain, Metadata: map[string]string{"missing": res.Missing}})
	case admission.OutcomeErrorAllowed, admission.OutcomeErrorDenied:
		if ic.onError != nil {
			ic.onError(ctx, method, res.Err)
		}
		ic.report(ctx, method, res)
		if res.Outcome == admission.OutcomeErrorAllowed {
			return nil, 0, nil
		}
		return nil, 0, refusal(codes.Unavailable, "grpclimit: rate limiter unavailable", ReasonUnavailable)
	}
	d := res.Decision
	name, _ := res.Limit() // "" for a backend that does not report the binding layer
	var md metadata.MD
	if ic.metadata {
		md = ic.quotaMD(res, gi, name)
	}
	ic.report(ctx, method, res)
	if d.Allowed {
		return md, d.Delay, nil
	}
	return pushback(md, d.RetryAfter), 0, denial(d, name, res.Item(res.Binding).Cost)
}

// pushback adds to md (nil: a new MD) the MDPushback entry of a refusal
// whose wait is retryAfter: the milliseconds rounded up, or -1 for Never.
func pushback(md metadata.MD, retryAfter time.Duration) metadata.MD {
	v := "-1"
	if retryAfter != hotlimit.Never {
		ms := int64(retryAfter / time.Millisecond)
		if retryAfter%time.Millisecond != 0 {
			ms++
		}
		// grpc-go reads the value with strconv.Atoi: an int, which a wait
		// of up to 2^31-1 ms (24 days) fits everywhere.
		v = strconv.FormatInt(min(ms, 1<<31-1), 10)
	}
	if md == nil {
		md = make(metadata.MD, 1)
	}
	md[MDPushback] = []string{v}
	return md
}

// report hands the hook, if there is one, the Event of the call decided
// in res: its binding limit only when the backend reported it.
func (ic *Interceptor) report(ctx context.Context, method string, res *admission.Result) {
	if ic.hook == nil {
		return
	}
	ev := res.Event()
	ev.Context, ev.Method, ev.Transport = ctx, method, "grpc"
	ic.hook(ev)
}

// quotaMD is the response metadata of a decided call: the binding
// layer's entries and, with Config.Identities, the ratelimit-policy and
// ratelimit entries that describe every layer. Its values share one backing array.
func (ic *Interceptor) quotaMD(res *admission.Result, gi int, name string) metadata.MD {
	d := res.Decision
	var vs [4]string
	vs[0] = strconv.FormatInt(d.Limit, 10)
	vs[1] = strconv.FormatInt(d.Remaining, 10)
	keys := [4]string{MDLimit, MDRemaining}
	n := 2
	if name != "" {
		vs[n], keys[n] = name, MDName
		n++
	}
	if !d.Allowed && d.RetryAfter != hotlimit.Never {
		vs[n], keys[n] = strconv.FormatInt(ceilSeconds(d.RetryAfter), 10), MDRetryAfter
		n++
	}
	all := append([]string(nil), vs[:n]...)
	md := make(metadata.MD, n+2)
	for i := range n {
		md[keys[i]] = all[i : i+1 : i+1]
	}
	if ic.layerMD && res.Layers() > 0 && res.Item(0).Known { // every layer's state reported
		md[MDPolicy] = ic.pipe.PolicyValue(res, gi)
		var b []byte
		for i := range res.Layers() {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendLayerItem(b, res.Item(i))
		}
		md[MDLayers] = []string{string(b)}
	}
	return md
}

// appendLayerItem appends one layer's MDLayers item: "name";r=R;t=T as
// the HTTP RateLimit field writes its items, t left out when the layer is
// full or its window unknown.
func appendLayerItem(b []byte, it admission.Item) []byte {
	b = append(b, '"')
	b = append(b, it.Name...)
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, min(max(it.Remaining, 0), wire.MaxSFInt), 10)
	if it.Window > 0 && it.Window != hotlimit.Never {
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSeconds(it.Window), 10)
	}
	return b
}

// ceilSeconds rounds d up to whole seconds, at least 1: a wait is never
// reported shorter than it is.
func ceilSeconds(d time.Duration) int64 { return max(1, wire.CeilSeconds(d)) }

// denial is the status of a call the backend denied; name and cost are
// the binding layer's ("" when unknown).
func denial(d hotlimit.Decision, name string, cost int64) error {
	subject := "limit:" + name
	if name == "" {
		subject = "limit"
	}
	if d.RetryAfter == hotlimit.Never {
		// A cost within the capacity is never only for a key hotlimit
		// refuses (longer than MaxKeyLen).
		desc := "cost " + strconv.FormatInt(cost, 10) + " exceeds the capacity " + strconv.FormatInt(d.Limit, 10)
		if cost <= d.Limit {
			desc = "the call's key or cost is refused by the limit"
		}
		return refusal(codes.ResourceExhausted, "grpclimit: the call can never pass the rate limit",
			ReasonNever, &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
				Subject:     subject,
				Description: desc,
			}}})
	}
	return refusal(codes.ResourceExhausted, "grpclimit: rate limit exceeded, retry after "+d.RetryAfter.String(),
		ReasonExceeded, &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject:     subject,
			Description: "quota of " + strconv.FormatInt(d.Limit, 10) + " used up",
		}}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)})
}

// refusal builds a status of code with an ErrorInfo of reason and the
// further details.
func refusal(code codes.Code, msg, reason string, details ...protoadapt.MessageV1) error {
	return refusalInfo(code, msg, &errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}, details...)
}

// refusalInfo builds a status of code with info and the further details.
func refusalInfo(code codes.Code, msg string, info *errdetails.ErrorInfo, details ...protoadapt.MessageV1) error {
	st := status.New(code, msg)
	all := append([]protoadapt.MessageV1{info}, details...)
	if withDetails, err := st.WithDetails(all...); err == nil {
		st = withDetails
	}
	return st.Err()
}
