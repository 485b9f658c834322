package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// Group is a method group: gRPC methods that cost the same and share one
// quota per identity.
type Group struct {
	// Name identifies the group in keys and metadata: letters, digits
	// and "._-", at most 64 bytes.
	Name string
	// Methods are full method names ("/pkg.Service/Method") or whole
	// services ("/pkg.Service/*"). A method is in the group of its exact
	// name if one lists it, else in the group listing its service, else
	// in Config.DefaultGroup.
	Methods []string
	// Limit names the policy in Config.Limits this group's layer uses.
	// Required unless Exempt.
	Limit string
	// Cost is what one call costs in Limit; 0 means 1. New refuses a
	// Cost above the limit's capacity: no call could ever pass.
	Cost int64
	// Costs, if set, overrides Cost for single methods of the group, by
	// full method name; each cost is at least 1 and at most the limit's
	// capacity, and each method must be one that Methods lists, by its
	// name or its service (a method that is only in the default group
	// cannot be named here).
	Costs map[string]int64
	// Exempt marks a group that is not limited at all (health checks,
	// reflection). It is the only way a method bypasses the limits.
	Exempt bool
}

// Config configures an Interceptor. Limits, Groups and DefaultGroup are
// required.
type Config struct {
	// Limits are the named policies (hotlimit.TokenBucket,
	// hotlimit.FixedWindow, ... values), passed to Backend. Names are
	// letters, digits and "._-", at most 64 bytes.
	Limits map[string]hotlimit.Policy
	// Groups are the method groups.
	Groups []Group
	// DefaultGroup names the group of a method that no group lists.
	DefaultGroup string
	// Key extracts the identity a call is limited by. nil: the client IP
	// that ClientIP finds (PeerKey(ClientIP)), so that behind a proxy the
	// ClientIP is given once, here, for the key and every fallback. A nil
	// Key gives the keys PeerKey(ClientIP) gives, for less: the pipeline
	// takes the address itself, and the in-process backend's keys hold
	// an IPv4 client's 4 bytes with no text written and parsed back (the
	// same for a nil IdentityLimit.Key).
	Key admission.KeyFunc[context.Context]
	// Global, if set, names a limit applied to every call's identity on
	// top of its group's, all or nothing: a call the global layer denies
	// does not consume its group's quota, and the other way round. It is
	// a budget per identity; one budget shared by every client is an
	// IdentityLimit keyed by admission.Everyone.
	Global string
	// GlobalCost is what one call costs in Global; 0 means 1. New
	// refuses a GlobalCost above Global's capacity.
	GlobalCost int64
	// Identities are limits by identities of their own, checked on every
	// call of every limited group together with its group's layer and
	// the global one, all or nothing: a per-peer limit next to a
	// per-token one, a per-tenant one (see IdentityLimit). At most 6.
	// With them, every decided call's metadata also describes each layer
	// (see the package documentation).
	Identities []IdentityLimit
	// ClientIP finds the client address (behind trusted proxies, see
	// admission.NewClientIP) for a nil Key or IdentityLimit.Key and for
	// FallbackToIP. nil: the peer address only.
	ClientIP *admission.ClientIP
	// FallbackToIP limits a call whose identity Key cannot extract by its
	// client IP instead (PeerKey(ClientIP)), under the same layers, and if
	// even that fails refuses it as without it. false, the default,
	// refuses the call with codes.ResourceExhausted and an
	// errdetails.ErrorInfo of reason "RATE_LIMIT_KEY_MISSING", without
	// RetryInfo (the call can never pass as it is).
	FallbackToIP bool
	// FailOpen lets a call through without rate-limit metadata when the
	// backend fails. false, the default, fails closed: the call is
	// refused with codes.Unavailable and no rate-limit metadata:
	// Unavailable, not ResourceExhausted, because the client has no quota
	// to wait for and did nothing wrong; gRPC clients retry Unavailable
	// with backoff.
	FailOpen bool
	// OnError, if set, is called synchronously with the error when Key
	// fails (before any fallback) or the backend fails, for logging: the
	// client is told only the outcome, never the error's text. It must
	// be fast and safe for concurrent use.
	OnError func(ctx context.Context, fullMethod string, err error)
	// Hook, if set, is called synchronously once per call the
	// interceptor decides (exempt calls included), after the decision and
	// before the handler runs or the refusal is returned, for metrics and
	// logs. It must be fast and safe for concurrent use, and must not
	// keep ev.Context beyond the call. ev.Method is the call's full
	// method ("/pkg.Service/Method"); ev.Limit and ev.Algorithm name the
	// binding limit only when the backend reports it (Backend.AllowStates
	// returned its index), "" otherwise. nil costs nothing.
	Hook func(ev admission.Event)
	// NoMetadata turns off the rate-limit response metadata (the
	// ratelimit-* and retry-after entries); the status details of a
	// denial are still sent. gRPC's handling of the metadata is most of
	// what the interceptor costs a call (see the package
	// documentation).
	NoMetadata bool
	// Backend builds the backend from Limits. nil:
	// admission.LocalBackend(), in-process limiters. Any admission
	// backend serves, such as redislimit's shared one.
	Backend admission.BackendFactory
	// Observers see every decision the backend makes or fails to make,
	// with how long it took (otellimit's and promlimit's observers).
	Observers []admission.Observer
	// Wait is how an admitted call waits out a LeakyBucket's
	// Decision.Delay (shaping) before its handler runs. It returns an
	// error if the call's context ends first; the call then fails with
	// the context's status (Canceled or DeadlineExceeded) and the quota
	// stays spent. nil: a timer, in real time.
	Wait func(ctx context.Context, d time.Duration) error
}

// IdentityLimit limits every call by an identity of its own, as a layer
// of the same all-or-nothing decision as the group's layer and
// Config.Global: a call one of them refuses consumes nothing in the
// others. Its key is the identity's (Interceptor.LayerKey(identity, "")),
// one quota per identity across all groups, shared with
// httplimit's Config.Identities of the same limit through one backend.
type IdentityLimit struct {
	// Limit names its policy in Config.Limits, which no other layer may
	// use.
	Limit string
	// Key extracts the identity: MetadataKey, FuncKey,
	// admission.Everyone, ... nil: the client IP that Config.ClientIP
	// finds.
	Key admission.KeyFunc[context.Context]
	// Cost is what one call costs there; 0 means 1. New refuses a Cost
	// above the limit's capacity.
	Cost int64
	// FallbackToIP keys the layer by the client IP (Config.ClientIP) when
	// Key finds no identity; false, the default, refuses the call.
	FallbackToIP bool
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

// Interceptor rate-limits gRPC calls: it puts each call in a method
// group, extracts the client's identity, asks a Backend to admit the call
// under the group's layer (and the global layer, all or nothing), and
// either runs the handler or refuses the call. See the package
// documentation for the status and metadata of each outcome.
//
// Create it with New; it is safe for concurrent use and holds no state of
// its own per call. Unary and Stream return the server interceptors; the
// Limit method makes it a go-grpc-middleware ratelimit.Limiter. Close
// releases the backend.
type Interceptor struct {
	pipe       *admission.Pipeline[context.Context]
	groups     []group
	exact      map[string]int // full method → group
	services   map[string]int // "/pkg.Service/" → group
	defaultIdx int
	onError    func(context.Context, string, error)
	hook       func(admission.Event)
	metadata   bool
	layerMD    bool // per-layer metadata: Config.Identities is set
	wait       func(context.Context, time.Duration) error
}

// group is a method group's configuration, written only by New.
type group struct {
	name   string
	exempt bool
	limit  string
	cost   int64
	costs  map[string]int64 // nil when no method overrides cost
}

// New validates cfg, builds its backend, and returns the Interceptor. The
// error names the offending field.
func New(cfg Config) (*Interceptor, error) {
	switch {
	case len(cfg.Groups) == 0:
		return nil, errors.New("grpclimit: Config.Groups is empty")
	}
	if cfg.ClientIP != nil {
		if err := cfg.ClientIP.Validate(); err != nil { // normalises it in place
			return nil, fmt.Errorf("grpclimit: Config.%w", err)
		}
	}
	layerMD := !cfg.NoMetadata && len(cfg.Identities) > 0
	pc, err := pipelineConfig(cfg, layerMD)
	if err != nil {
		return nil, err
	}
	p, err := admission.New(pc) // checks the groups' names, duplicates and costs
	if err != nil {
		return nil, err
	}
	ic := &Interceptor{
		pipe:     p,
		exact:    make(map[string]int),
		services: make(map[string]int),
		onError:  cfg.OnError,
		hook:     cfg.Hook,
		metadata: !cfg.NoMetadata,
		layerMD:  layerMD,
		wait:     cfg.Wait,
	}
	if ic.wait == nil {
		ic.wait = waitTimer
	}
	if err := ic.buildGroups(cfg); err != nil {
		p.Close()
		return nil, err
	}
	return ic, nil
}

// pipelineConfig is the pipeline's Config of cfg.
func pipelineConfig(cfg Config, layerMD bool) (admission.Config[context.Context], error) {
	pc := admission.Config[context.Context]{
		Prefix:     "grpclimit",
		Noun:       "call",
		Limits:     cfg.Limits,
		Groups:     make([]admission.Group[context.Context], len(cfg.Groups)),
		Key:        cfg.Key,
		Global:     cfg.Global,
		GlobalCost: cfg.GlobalCost,
		Backend:    cfg.Backend,
		FailOpen:   cfg.FailOpen,
		States:     layerMD,
		Identify:   cfg.Hook != nil || len(cfg.Observers) > 0,
		Observers:  cfg.Observers,
	}
	// A nil Key or IdentityLimit.Key limits by the peer's address: the
	// pipeline's own (ClientAddr), PeerKey's identity, whose text a
	// Local's keys need not hold.
	c := cfg.ClientIP
	pc.ClientAddr = func(ctx context.Context) (netip.Prefix, error) { return ClientPrefix(ctx, c) }
	if cfg.FallbackToIP {
		pc.Fallback = PeerKey(cfg.ClientIP)
	}
	for i, g := range cfg.Groups {
		pc.Groups[i] = admission.Group[context.Context]{Name: g.Name, Limit: g.Limit, Cost: g.Cost, Exempt: g.Exempt}
	}
	for _, il := range cfg.Identities {
		layer := admission.IdentityLayer[context.Context]{Limit: il.Limit, Key: il.Key, Cost: il.Cost}
		if il.FallbackToIP {
			layer.Fallback = PeerKey(cfg.ClientIP)
		}
		pc.Identities = append(pc.Identities, layer)
	}
	return pc, nil
}

// buildGroups registers the groups' methods, finds the default group and
// checks the per-method Costs. The pipeline has checked the rest of each
// group: groups are validated once, by admission.New.
func (ic *Interceptor) buildGroups(cfg Config) error {
	byName := make(map[string]int, len(cfg.Groups))
	ic.groups = make([]group, len(cfg.Groups))
	for i, g := range cfg.Groups {
		byName[g.Name] = i
		if err := ic.addGroup(i, g); err != nil {
			return err
		}
	}
	var ok bool
	if ic.defaultIdx, ok = byName[cfg.DefaultGroup]; !ok {
		return fmt.Errorf("grpclimit: Config.DefaultGroup %q is not a group", cfg.DefaultGroup)
	}
	for i, g := range cfg.Groups {
		for m, c := range g.Costs {
			if c < 1 {
				return fmt.Errorf("grpclimit: group %q: Costs[%q] must be ≥ 1, got %d", g.Name, m, c)
			}
			if !ic.listed(m, i) {
				return fmt.Errorf("grpclimit: group %q: Costs names %q, which is not a method of the group", g.Name, m)
			}
		}
	}
	return ic.checkCosts(cfg.Limits)
}

// checkCosts refuses a Costs entry above its group's limit's capacity:
// every call of the method would be refused for good. (The pipeline
// checks Cost and GlobalCost.)
func (ic *Interceptor) checkCosts(limits map[string]hotlimit.Policy) error {
	for i := range ic.groups {
		g := &ic.groups[i]
		if g.exempt || len(g.costs) == 0 {
			continue
		}
		pi, _ := hotlimit.Describe(limits[g.limit]) // described without error by New already
		capacity := pi.Limit
		for _, m := range sortedKeys(g.costs) {
			if c := g.costs[m]; c > capacity {
				return fmt.Errorf("grpclimit: group %q: Costs[%q] %d is above limit %q's capacity %d: no call of it could ever pass", g.name, m, c, g.limit, capacity)
			}
		}
	}
	return nil
}

// sortedKeys returns m's keys in order, so that the first error is the
// same on every run.
func sortedKeys(m map[string]int64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// addGroup checks group i and registers its methods.
func (ic *Interceptor) addGroup(i int, g Group) error {
	gs := &ic.groups[i]
	gs.name, gs.exempt, gs.limit, gs.cost = g.Name, g.Exempt, g.Limit, max(g.Cost, 1)
	if len(g.Costs) > 0 {
		gs.costs = make(map[string]int64, len(g.Costs))
		for m, c := range g.Costs {
			gs.costs[m] = c
		}
	}
	for _, m := range g.Methods {
		svc, method, ok := splitMethod(m)
		if !ok {
			return fmt.Errorf("grpclimit: group %q: method %q is not \"/pkg.Service/Method\" or \"/pkg.Service/*\"", g.Name, m)
		}
		table, k := ic.exact, m
		if method == "*" {
			table, k = ic.services, svc
		}
		if j, dup := table[k]; dup {
			return fmt.Errorf("grpclimit: group %q: method %q is already in group %q", g.Name, m, ic.groups[j].name)
		}
		table[k] = i
	}
	return nil
}

// splitMethod splits "/pkg.Service/Method" into its service prefix
// "/pkg.Service/" and "Method".
func splitMethod(m string) (svc, method string, ok bool) {
	i := strings.LastIndexByte(m, '/')
	if len(m) < 4 || m[0] != '/' || i <= 1 || i == len(m)-1 || strings.IndexByte(m[1:i], '/') >= 0 {
		return "", "", false
	}
	method = m[i+1:]
	if strings.Contains(method, "*") && method != "*" || strings.Contains(m[:i], "*") {
		return "", "", false
	}
	return m[:i+1], method, true
}

// listed reports whether group i lists full method m, by its name or its
// service, and m is in it (no other group lists its exact name).
func (ic *Interceptor) listed(m string, i int) bool {
	svc, method, ok := splitMethod(m)
	if !ok || method == "*" {
		return false
	}
	if j, ok := ic.exact[m]; ok {
		return j == i
	}
	j, ok := ic.services[svc]
	return ok && j == i
}

// groupOf returns the group index of a full method name.
func (ic *Interceptor) groupOf(fullMethod string) int {
	if i, ok := ic.exact[fullMethod]; ok {
		return i
	}
	if j := strings.LastIndexByte(fullMethod, '/'); j > 0 {
		if i, ok := ic.services[fullMethod[:j+1]]; ok {
			return i
		}
	}
	return ic.defaultIdx
}

// Backend returns the backend the interceptor decides through, such as a
// *admission.Local whose limiters a test or an operator can inspect.
func (ic *Interceptor) Backend() admission.Backend { return ic.pipe.Backend() }

// Close closes the backend if it has a Close method.
func (ic *Interceptor) Close() error { return ic.pipe.Close() }
