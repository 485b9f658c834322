package httplimit

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// DenialLogOptions configure a DenialLogger. The zero value is usable.
type DenialLogOptions struct {
	// Instance names this process in every line (the "instance"
	// attribute), so that lines from several replicas can be told apart.
	// "": the host name (os.Hostname), or "unknown" if it has none.
	Instance string
	// Rate and Burst bound the lines written: a token bucket of Burst
	// lines refilled at Rate. Zero Rate: 10 per second; zero Burst: 50.
	Rate  hotlimit.Rate
	Burst int64
	// Clock is the time source of the bucket; nil: the default clock.
	// Tests pass a hotlimit.ManualClock.
	Clock hotlimit.Clock
}

// A DenialLogger writes one structured log line (log/slog) for each
// request the middleware refused or would have refused, with what an
// operator needs to diagnose it and no secret. Its Hook method is a
// Config.Hook:
//
//	dl, err := httplimit.NewDenialLogger(slog.Default(), httplimit.DenialLogOptions{})
//	...
//	mw, err := httplimit.New(httplimit.Config{..., Hook: dl.Hook})
//
// It logs the outcomes (admission.Outcome) OutcomeDenied,
// OutcomeDeniedNever, OutcomeKeyDenied, OutcomeCostInvalid and
// OutcomeDryRunDenied at slog.LevelInfo (a denial is the limiter
// working), and OutcomeErrorDenied and OutcomeErrorAllowed (the backend
// could not decide, so the failure policy did) at slog.LevelWarn.
// Admitted and exempt requests are not logged. Each line
// has the message "rate limit denial" (or "rate limiter unavailable" for
// the backend failures) and these attributes:
//
//	id_hash         admission.Event.IdentityHash as 16 hex digits: a seeded hash of the
//	                client's identity, stable for the middleware's life and
//	                meaningless outside it; absent when no key was extracted
//	id_kind         admission.Event.IdentityKind: "tok", "ip", a ContextKey kind
//	id_fallback     true when a layer's key is the client IP because its
//	                Key failed (admission.Event.Fallback): Config.Key's, and
//	                id_hash and id_kind then describe the IP, or an
//	                IdentityLimit's, and they still describe Config.Key's
//	                identity; absent otherwise
//	group           the route group
//	limit           the binding limit's name (absent without a decision)
//	algorithm       its algorithm: "TokenBucket", "FixedWindow", ... (admission.Event.Algorithm)
//	policy_version  Config.PolicyVersion; absent when it is empty: set it
//	                (a configuration hash, a deploy id) to know which
//	                configuration decided
//	instance        DenialLogOptions.Instance
//	method          the request's method
//	outcome         the Outcome: "denied", "denied_never", "key_denied", "cost_invalid",
//	                "dry_run_denied", "error_denied", "error_allowed"
//	reason          Reason(ev): "rate_limit_exceeded",
//	                "rate_limit_cost_exceeds_limit", "rate_limit_cost_invalid",
//	                "rate_limit_key_missing" or "rate_limiter_unavailable"
//	decision        a group, when the backend decided: limit (capacity),
//	                remaining (capacity left: 0 on most denials, more when
//	                the request cost more than what is left),
//	                retry_after and reset_after (durations; retry_after is
//	                absent when the request can never pass)
//	error           the key or backend error, for those outcomes
//
// It never logs the key, the raw identity, the request's headers, its
// path or its query (a path or query can carry a secret; the route group
// names the route). Errors are logged as their text: httplimit's and
// redislimit's errors never hold a key or a credential, and a custom
// KeyFunc or Backend must not put one in its errors either.
//
// The logger limits itself, so that a flood of denials cannot flood the
// log: a hotlimit token bucket admits each line, and a line it refuses
// is only counted, by outcome. The next line written is then preceded by
// one summary line at slog.LevelWarn, "rate limit denial lines
// suppressed", with the attributes suppressed (the total), one count per
// outcome that had any (denied=..., key_denied=...), and instance. Over
// any interval of length t the logger writes at most Burst + Rate·t
// denial lines and as many summary lines, whatever the traffic. Flush
// writes a pending summary at once (at shutdown, or from a ticker if
// suppressed counts must not wait for the next line).
//
// A suppressed line costs one hotlimit decision and one atomic add, and
// allocates nothing. A DenialLogger is safe for concurrent use; create
// it with NewDenialLogger. It holds no goroutine and needs no Close.
type DenialLogger struct {
	log        *slog.Logger
	instance   string
	budget     *hotlimit.Limiter // one key: the lines allowed now
	suppressed [outcomes]atomic.Uint64
	pending    atomic.Bool // some suppressed count may be non-zero
}

// budgetKey is the only key of a DenialLogger's budget limiter.
const budgetKey = "lines"

// NewDenialLogger returns a DenialLogger writing to logger. It returns an
// error for a nil logger or an invalid Rate or Burst.
func NewDenialLogger(logger *slog.Logger, opts DenialLogOptions) (*DenialLogger, error) {
	if logger == nil {
		return nil, errors.New("httplimit: NewDenialLogger: nil logger")
	}
	if opts.Rate == (hotlimit.Rate{}) {
		opts.Rate = hotlimit.PerSecond(10)
	}
	if opts.Burst == 0 {
		opts.Burst = 50
	}
	if opts.Instance == "" {
		opts.Instance = "unknown"
		if h, err := os.Hostname(); err == nil && h != "" {
			opts.Instance = h
		}
	}
	lopts := []hotlimit.Option{hotlimit.WithSweepInterval(0), hotlimit.WithShards(1)} // one key
	if opts.Clock != nil {
		lopts = append(lopts, hotlimit.WithClock(opts.Clock))
	}
	budget, err := hotlimit.New(hotlimit.TokenBucket{Rate: opts.Rate, Burst: opts.Burst}, lopts...)
	if err != nil {
		return nil, errors.New("httplimit: NewDenialLogger: " + err.Error())
	}
	return &DenialLogger{log: logger, instance: opts.Instance, budget: budget}, nil
}

// logged reports whether the logger writes a line for outcome o.
func logged(o admission.Outcome) bool {
	switch o {
	case admission.OutcomeDenied, admission.OutcomeDeniedNever, admission.OutcomeKeyDenied, admission.OutcomeDryRunDenied,
		admission.OutcomeErrorDenied, admission.OutcomeErrorAllowed, admission.OutcomeCostInvalid:
		return true
	}
	return false
}

// Hook logs ev if it is a denial (see DenialLogger), within the budget.
// Use it as Config.Hook, or call it from one.
func (dl *DenialLogger) Hook(ev admission.Event) {
	if !logged(ev.Outcome) {
		return
	}
	if !dl.budget.Allow(budgetKey).Allowed {
		dl.suppressed[ev.Outcome].Add(1)
		dl.pending.Store(true)
		return
	}
	ctx := ev.Context
	if ctx == nil {
		ctx = context.Background()
	}
	dl.flush(ctx)
	dl.write(ctx, &ev)
}

// Flush writes the summary of the lines suppressed since the last
// summary, if there were any.
func (dl *DenialLogger) Flush() { dl.flush(context.Background()) }

func (dl *DenialLogger) flush(ctx context.Context) {
	if !dl.pending.Load() {
		return
	}
	dl.pending.Store(false)
	var total uint64
	attrs := make([]slog.Attr, 1, 2+outcomes)
	for o := range outcomes {
		if n := dl.suppressed[o].Swap(0); n > 0 {
			total += n
			attrs = append(attrs, slog.Uint64(o.String(), n))
		}
	}
	if total == 0 {
		return // a concurrent flush wrote them
	}
	attrs[0] = slog.Uint64("suppressed", total)
	attrs = append(attrs, slog.String("instance", dl.instance))
	dl.log.LogAttrs(ctx, slog.LevelWarn, "rate limit denial lines suppressed", attrs...)
}

// write logs ev's line.
func (dl *DenialLogger) write(ctx context.Context, ev *admission.Event) {
	level, msg := slog.LevelInfo, "rate limit denial"
	reason := Reason(ev)
	if ev.Outcome == admission.OutcomeErrorDenied || ev.Outcome == admission.OutcomeErrorAllowed {
		level, msg = slog.LevelWarn, "rate limiter unavailable"
	}
	attrs := make([]slog.Attr, 0, 14)
	if ev.IdentityHash != 0 {
		attrs = append(attrs, slog.String("id_hash", hex16(ev.IdentityHash)))
	}
	if ev.IdentityKind != "" {
		attrs = append(attrs, slog.String("id_kind", ev.IdentityKind))
	}
	if ev.Fallback {
		attrs = append(attrs, slog.Bool("id_fallback", true))
	}
	attrs = append(attrs, slog.String("group", ev.Group))
	if ev.Limit != "" {
		attrs = append(attrs, slog.String("limit", ev.Limit), slog.String("algorithm", ev.Algorithm))
	}
	if ev.PolicyVersion != "" {
		attrs = append(attrs, slog.String("policy_version", ev.PolicyVersion))
	}
	attrs = append(attrs, slog.String("instance", dl.instance))
	if ev.Method != "" {
		attrs = append(attrs, slog.String("method", ev.Method))
	}
	attrs = append(attrs, slog.String("outcome", ev.Outcome.String()), slog.String("reason", reason))
	if ev.Err == nil && ev.Limit != "" {
		d := ev.Decision
		dec := make([]any, 0, 4)
		dec = append(dec, slog.Int64("limit", d.Limit), slog.Int64("remaining", d.Remaining))
		if !d.Allowed && d.RetryAfter != hotlimit.Never {
			dec = append(dec, slog.Duration("retry_after", d.RetryAfter))
		}
		dec = append(dec, slog.Duration("reset_after", d.ResetAfter))
		attrs = append(attrs, slog.Group("decision", dec...))
	}
	if ev.Err != nil {
		attrs = append(attrs, slog.String("error", ev.Err.Error()))
	}
	dl.log.LogAttrs(ctx, level, msg, attrs...)
}

// hex16 formats h as 16 lower-case hex digits.
func hex16(h uint64) string {
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = "0123456789abcdef"[h&15]
		h >>= 4
	}
	return string(b[:])
}
