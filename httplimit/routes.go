package httplimit

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/ident"
)

// groupState is a group's configuration and counters.
//
// Invariants: every field but counts is written only by New.
type groupState struct {
	name     string
	exempt   bool
	cost     int64
	costFunc func(*http.Request) (int64, error) // nil: cost
	policy   *policyInfo
	names    [2]string // the RateLimit items' names: the group's layer, then the global one
	policies []string  // RateLimit-Policy value of Config.Limits: the group's item, then the global one
	// live is the RateLimit-Policy value of the policies the latest
	// decisions were made under, which differ from Config.Limits after a
	// runtime change (Local.Classes().SetPolicy); built again only when
	// they change.
	live   atomic.Pointer[livePolicies]
	counts [OutcomeCount]atomic.Uint64
}

// livePolicies is a RateLimit-Policy value and the policies it describes.
type livePolicies struct {
	infos [2]hotlimit.PolicyInfo
	value []string
}

// policyValue returns the RateLimit-Policy value for the policies the
// layers in sc were decided under, as their states report them, or those
// of Config.Limits for a state that does not say.
func (g *groupState) policyValue(sc *scratch) []string {
	cur := g.live.Load()
	infos := cur.infos
	for i := range sc.nstates {
		if pi := sc.states[i].Policy; pi.Algorithm != 0 {
			infos[i] = pi
		}
	}
	if infos == cur.infos {
		return cur.value
	}
	v := policyItem(g.names[0], infos[0])
	if g.names[1] != "" {
		v += ", " + policyItem(g.names[1], infos[1])
	}
	next := &livePolicies{infos: infos, value: []string{v}}
	g.live.Store(next) // racing stores each hold a value true of some decision
	return next.value
}

// globalSuffix tells the global layer's item from the group's when both
// use the same limit. "/" is not allowed in a limit's name, so the
// suffixed name never names another limit.
const globalSuffix = "/global"

// buildGroups sets m.groups, m.byName and m.defaultIdx from groups, each
// limited by its named entry of limits. m.global must be set first: a
// group's RateLimit-Policy value lists the global limit too.
func (m *Middleware) buildGroups(groups []Group, defaultGroup string, limits map[string]*policyInfo) error {
	m.groups = make([]groupState, len(groups))
	m.byName = make(map[string]int, len(groups))
	for i, g := range groups {
		gs := &m.groups[i]
		if !ident.ValidName(g.Name) {
			return fmt.Errorf("httplimit: Config.Groups[%d]: name %q must be 1 to 64 letters, digits or \"._-\"", i, g.Name)
		}
		if _, dup := m.byName[g.Name]; dup {
			return fmt.Errorf("httplimit: Config.Groups[%d]: duplicate group %q", i, g.Name)
		}
		m.byName[g.Name] = i
		gs.name, gs.exempt, gs.cost, gs.costFunc = g.Name, g.Exempt, g.Cost, g.CostFunc
		if g.Cost < 0 {
			return fmt.Errorf("httplimit: group %q: Cost must be ≥ 0, got %d", g.Name, g.Cost)
		}
		if gs.cost == 0 {
			gs.cost = 1
		}
		if g.Exempt {
			continue
		}
		if gs.policy = limits[g.Limit]; gs.policy == nil {
			return fmt.Errorf("httplimit: group %q: Limit %q is not in Config.Limits", g.Name, g.Limit)
		}
		gs.names[0] = gs.policy.name
		v := policyItem(gs.names[0], gs.policy.PolicyInfo)
		live := &livePolicies{infos: [2]hotlimit.PolicyInfo{gs.policy.PolicyInfo}}
		if m.global != nil {
			gs.names[1] = m.global.name
			if gs.names[1] == gs.names[0] {
				gs.names[1] += globalSuffix
			}
			v += ", " + policyItem(gs.names[1], m.global.PolicyInfo)
			live.infos[1] = m.global.PolicyInfo
		}
		gs.policies = []string{v}
		live.value = gs.policies
		gs.live.Store(live)
	}
	var ok bool
	if m.defaultIdx, ok = m.byName[defaultGroup]; !ok {
		return fmt.Errorf("httplimit: Config.DefaultGroup %q is not a group", defaultGroup)
	}
	return nil
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

// group returns the request's group index: Config.Classify's answer, or
// the group of the ServeMux pattern the request matches, or the default
// group.
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
