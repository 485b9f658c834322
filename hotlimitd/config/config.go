package config

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/hotlimit/hotlimit"
)

// Unit is the time unit of a rate_limit: the length of its window, or the
// period of its rate. Its values are those of the rate limit service
// protocol's RateLimitResponse.RateLimit.Unit, so a Unit converts to it
// directly. The zero Unit is no unit (an unlimited rule has none).
type Unit int32

// The units a rate_limit accepts, by their protocol numbers.
const (
	Second Unit = 1
	Minute Unit = 2
	Hour   Unit = 3
	Day    Unit = 4
	Month  Unit = 5 // 30 days
	Year   Unit = 6 // 365 days
	Week   Unit = 7
)

var unitNames = [...]string{Second: "second", Minute: "minute", Hour: "hour", Day: "day", Month: "month", Year: "year", Week: "week"}

var unitLengths = [...]time.Duration{
	Second: time.Second, Minute: time.Minute, Hour: time.Hour, Day: 24 * time.Hour,
	Month: 30 * 24 * time.Hour, Year: 365 * 24 * time.Hour, Week: 7 * 24 * time.Hour,
}

// String returns the unit's name as the file writes it ("second"), or
// "Unit(n)" for a number that is not a unit.
func (u Unit) String() string {
	if u >= Second && u <= Week {
		return unitNames[u]
	}
	return "Unit(" + strconv.Itoa(int(u)) + ")"
}

// Duration returns the unit's length: a month is 30 days and a year 365
// days, as envoyproxy/ratelimit counts them. It returns 0 for a number
// that is not a unit.
func (u Unit) Duration() time.Duration {
	if u >= Second && u <= Week {
		return unitLengths[u]
	}
	return 0
}

// Algorithm is the algorithm of a rate_limit. The zero Algorithm is
// FixedWindow, envoyproxy/ratelimit's own.
type Algorithm int

// The algorithms, each mapped to the hotlimit policy of the same name.
const (
	FixedWindow   Algorithm = iota // hotlimit.FixedWindow{Limit: requests_per_unit, Window: unit}
	SlidingWindow                  // hotlimit.SlidingWindow{Limit: requests_per_unit, Window: unit}
	SlidingLog                     // hotlimit.SlidingLog{Limit: requests_per_unit, Window: unit}
	TokenBucket                    // hotlimit.TokenBucket{Rate: requests_per_unit per unit, Burst: burst}
	LeakyBucket                    // hotlimit.LeakyBucket{Rate: requests_per_unit per unit, Capacity: burst−1}
)

var algorithmNames = [...]string{
	FixedWindow: "fixed_window", SlidingWindow: "sliding_window", SlidingLog: "sliding_log",
	TokenBucket: "token_bucket", LeakyBucket: "leaky_bucket",
}

// String returns the algorithm's name as the file writes it
// ("fixed_window"), or "Algorithm(n)".
func (a Algorithm) String() string {
	if a >= FixedWindow && a <= LeakyBucket {
		return algorithmNames[a]
	}
	return "Algorithm(" + strconv.Itoa(int(a)) + ")"
}

// A Limit is one rule's rate_limit, read-only once its Config is built.
type Limit struct {
	// Name is the limit's name for a backend: the rule's place in the
	// file (domain, then each level's key and value) and its policy
	// (algorithm, requests_per_unit, unit, burst), escaped so that no
	// two rules share it. It stays the same across reloads while the
	// place and the policy do, and changes when the policy changes, so a
	// backend keeps the state of unchanged limits and starts changed
	// ones afresh. Cost, shadow_mode and the file's layout (lines,
	// comments, order) are not part of it. An Unlimited limit's policy
	// part is "unlimited", and one that refuses every hit has "refuse".
	Name string

	// Domain is the domain of the rule.
	Domain string

	// RuleName is rate_limit's name (envoyproxy/ratelimit's, that
	// another rule's replaces refers to); "" when not given.
	RuleName string
	// Replaces lists the RuleNames this limit replaces: when one request
	// matches both, the replaced limits are not decided (see
	// DropReplaced).
	Replaces []string

	// Unit is rate_limit's unit; 0 for an Unlimited limit.
	Unit Unit
	// RequestsPerUnit is requests_per_unit. 0 (without Unlimited) refuses
	// every hit, as envoyproxy/ratelimit does: such a limit has no Policy
	// and is not in Limits; a server answers OVER_LIMIT without asking a
	// backend.
	RequestsPerUnit uint32
	// Algorithm is rate_limit's algorithm (FixedWindow when not given).
	Algorithm Algorithm
	// Burst is the capacity of a token or leaky bucket: how many hits it
	// admits at once (default RequestsPerUnit); 0 for the windows.
	Burst int64
	// Cost is what one hit costs in the limit (default 1); a request's
	// hits_addend multiplies it. It is at most the limit's capacity.
	Cost int64

	// Unlimited is rate_limit's unlimited: the rule matches and never
	// refuses (no Policy, not in Limits).
	Unlimited bool
	// Shadow is the rule's shadow_mode: decided and counted as usual, but
	// the answer is always OK.
	Shadow bool
	// DetailedMetric is the rule's detailed_metric: a server that names
	// metrics after descriptors adds the value matched by a key-only
	// rule to the name. It changes no decision.
	DetailedMetric bool

	// Policy is what a backend decides with: nil for an Unlimited limit
	// and for a RequestsPerUnit of 0.
	Policy hotlimit.Policy

	// File and Line are where the rule's rate_limit is.
	File string
	Line int
}

// Refuses reports whether l refuses every hit (RequestsPerUnit 0 and not
// Unlimited).
func (l *Limit) Refuses() bool { return !l.Unlimited && l.RequestsPerUnit == 0 }

// An Entry is one key/value entry of a request's descriptor.
type Entry struct{ Key, Value string }

// Config is a set of domains, each a tree of descriptor rules, built by
// Parse, Load or Default. It is read-only once built, and safe for
// concurrent use. The zero Config has no domain: nothing matches.
type Config struct {
	domains map[string]*domain
	limits  []*Limit // every limit, in file order

	builders map[string]*domainBuilder // while merging domains (MergeDomains): each domain's
}

// domain is one domain's rules.
type domain struct {
	name string
	file string
	line int
	root node
}

// node is one level of rules: the children of a rule (or of the domain).
// A request's entry picks among them as envoyproxy/ratelimit does: the
// rule with its key and value, else the first wildcard rule (in file
// order) whose key is the entry's and whose value's prefix starts the
// entry's value, else the rule with its key and no value.
type node struct {
	limit   *Limit           // the rule's rate_limit; nil when it has none
	exact   map[kv]*node     // rules with a value (wildcards too, by their written value)
	wild    []wildcard       // rules whose value ends in '*', in file order
	keyOnly map[string]*node // rules without a value
	// share is the rule's share_threshold: every value its wildcard
	// matches counts in one counter, keyed by the written value.
	share bool
	value string // the rule's written value ("" for a key-only rule)
	file  string // where the rule is
	line  int
}

// at says where n is, for an error in file: "line N" there, else
// "other.yaml:N" (domains merged across files).
func (n *node) at(file string) string {
	if n.file == file {
		return "line " + strconv.Itoa(n.line)
	}
	return n.file + ":" + strconv.Itoa(n.line)
}

type kv struct{ key, value string }

type wildcard struct {
	key, prefix string
	n           *node
}

func (n *node) hasChildren() bool { return len(n.exact) > 0 || len(n.keyOnly) > 0 }

// Domains returns the names of c's domains, sorted.
func (c *Config) Domains() []string { return slices.Sorted(maps.Keys(c.domains)) }

// Limits returns every limit of c that a backend decides (every Limit
// with a Policy), by Name. The map is the caller's.
func (c *Config) Limits() map[string]hotlimit.Policy {
	m := make(map[string]hotlimit.Policy, len(c.limits))
	for _, l := range c.limits {
		if l.Policy != nil {
			m[l.Name] = l.Policy
		}
	}
	return m
}

// All returns every limit of c (Unlimited ones and those that refuse
// every hit too), in the order of the files and of their rules. The
// slice is the caller's; the Limits are shared and must not be modified.
func (c *Config) All() []*Limit { return slices.Clone(c.limits) }

// DropReplaced applies envoyproxy/ratelimit's replaces to the limits one
// request matched (nil where a descriptor matched none): it sets to nil
// every limit whose RuleName one of the matched limits Replaces, so that
// only the replacing limit is decided and the replaced one is left
// untouched. Every replaces of the request counts, whatever the order of
// its descriptors, an Unlimited limit's included; an Unlimited limit is
// never dropped (its descriptor stays unlimited), as envoyproxy/ratelimit
// has it. It does not allocate for up to 64 limits.
func DropReplaced(limits []*Limit) {
	var small [64]bool
	drop := small[:0]
	if len(limits) > len(small) {
		drop = make([]bool, 0, len(limits))
	}
	drop = drop[:len(limits)]
	some := false
	for i, l := range limits {
		if l == nil || l.RuleName == "" || l.Unlimited {
			continue
		}
		for _, r := range limits {
			if r != nil && slices.Contains(r.Replaces, l.RuleName) {
				drop[i], some = true, true
				break
			}
		}
	}
	if !some {
		return
	}
	for i := range limits {
		if drop[i] {
			limits[i] = nil
		}
	}
}

// HasDomain reports whether c has the domain name.
func (c *Config) HasDomain(name string) bool { return c.domains[name] != nil }

// Override returns the limit of a descriptor that carries its own limit
// (the rate limit service protocol's RateLimitDescriptor.limit:
// requests_per_unit per unit), as envoyproxy/ratelimit applies it in a
// domain its configuration has, in place of whatever rule the
// descriptor would match, or of none: a fixed window of
// requestsPerUnit per unit, cost 1, never shadow, without a RuleName,
// so that it neither replaces nor is replaced. requestsPerUnit 0
// refuses every hit. Its Name is the domain's and the policy's, in a
// form no rule's Name takes, so that each override of a domain is a
// limit of its own, and a descriptor whose override changes starts
// afresh. The error names a unit that is not one.
//
// A server counts a descriptor under an override by all of its entries,
// keys and values (OverrideKey), not by a rule's.
func Override(domain string, requestsPerUnit uint32, unit Unit) (*Limit, error) {
	if unit.Duration() == 0 {
		return nil, fmt.Errorf("config: a descriptor's limit has unit %d, want 1 (second) to 7 (week)", int32(unit))
	}
	l := &Limit{Domain: domain, Unit: unit, RequestsPerUnit: requestsPerUnit, Cost: 1}
	if requestsPerUnit == 0 {
		l.Name = escape(domain) + "#override:refuse/" + unit.String()
		return l, nil
	}
	l.Policy = hotlimit.FixedWindow{Limit: int64(requestsPerUnit), Window: unit.Duration()}
	l.Name = escape(domain) + "#override:" + policyName(l)
	return l, nil
}

// OverrideKey appends to dst the key a descriptor with an Override is
// counted under: each entry's key and value, each length-prefixed, so
// that two descriptors share it exactly when their entries are the same.
func OverrideKey(dst []byte, entries []Entry) []byte {
	for _, e := range entries {
		dst = binary.AppendUvarint(dst, uint64(len(e.Key)))
		dst = append(dst, e.Key...)
		dst = binary.AppendUvarint(dst, uint64(len(e.Value)))
		dst = append(dst, e.Value...)
	}
	return dst
}
