package httplimit

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/hotlimit/hotlimit/admission"
)

// groupState is a route group's configuration and counters.
//
// Invariants: every field but counts is written only by New.
type groupState struct {
	name     string
	cost     int64
	costFunc func(*http.Request) (int64, error) // nil: cost
	counts   [outcomes]atomic.Uint64
}

// outcomes is the number of admission.Outcome values.
const outcomes = admission.Outcome(len(admission.GroupCounts{}.Counts))

// newGroups sets m.groups from groups, before the pipeline is built
// (each CostFunc is priced through its groupState).
func (m *Middleware) newGroups(groups []Group) {
	m.groups = make([]groupState, len(groups))
	for i, g := range groups {
		m.groups[i] = groupState{name: g.Name, cost: max(g.Cost, 1), costFunc: g.CostFunc}
	}
}

// buildGroups sets m.byName and m.defaultIdx from groups, which the
// pipeline has checked (names, duplicates, costs): groups are validated
// once, by admission.New.
func (m *Middleware) buildGroups(groups []Group, defaultGroup string) error {
	m.byName = make(map[string]int, len(groups))
	for i, g := range groups {
		m.byName[g.Name] = i
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
