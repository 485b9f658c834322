package httplimit

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// This file holds a strict parser for the RFC 9651 List fields the
// middleware writes (RateLimit-Policy, RateLimit). It accepts only what
// RFC 9651 section 4.2 accepts, restricted to the bare-item types the
// draft uses (String, Token, Integer, Boolean): anything else, including
// an Integer of more than 15 digits, fails the whole field.

var errSF = errors.New("malformed structured field")

type sfItem struct {
	kind string // "string", "token", "integer", "boolean"
	str  string
	n    int64
}

type sfMember struct {
	item   sfItem
	params map[string]sfItem
	keys   []string // in order, without repeats
}

// parseSFListStrict parses a List field value (field lines joined with
// ", ").
func parseSFListStrict(s string) ([]sfMember, error) {
	i := 0
	for i < len(s) && s[i] == ' ' {
		i++
	}
	var list []sfMember
	for i < len(s) {
		var m sfMember
		var err error
		if m.item, i, err = sfBareItem(s, i); err != nil {
			return nil, err
		}
		m.params = map[string]sfItem{}
		for i < len(s) && s[i] == ';' {
			i++
			for i < len(s) && s[i] == ' ' {
				i++
			}
			if i >= len(s) || !(s[i] >= 'a' && s[i] <= 'z' || s[i] == '*') {
				return nil, errSF
			}
			j := i + 1
			for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9' || s[j] == '_' || s[j] == '-' || s[j] == '.' || s[j] == '*') {
				j++
			}
			key := s[i:j]
			i = j
			v := sfItem{kind: "boolean", n: 1}
			if i < len(s) && s[i] == '=' {
				if v, i, err = sfBareItem(s, i+1); err != nil {
					return nil, err
				}
			}
			if _, dup := m.params[key]; !dup {
				m.keys = append(m.keys, key)
			}
			m.params[key] = v
		}
		list = append(list, m)
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			return list, nil
		}
		if s[i] != ',' {
			return nil, errSF
		}
		i++
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			return nil, errSF // trailing comma
		}
	}
	return list, nil
}

func sfBareItem(s string, i int) (sfItem, int, error) {
	if i >= len(s) {
		return sfItem{}, i, errSF
	}
	switch c := s[i]; {
	case c == '-' || c >= '0' && c <= '9':
		j := i
		if c == '-' {
			j++
		}
		start := j
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == start || j-start > 15 || j < len(s) && s[j] == '.' {
			return sfItem{}, i, errSF // no digits, too many, or a Decimal
		}
		n, err := strconv.ParseInt(s[i:j], 10, 64)
		if err != nil {
			return sfItem{}, i, errSF
		}
		return sfItem{kind: "integer", n: n}, j, nil
	case c == '"':
		var b []byte
		for j := i + 1; j < len(s); j++ {
			switch c := s[j]; {
			case c == '\\':
				j++
				if j >= len(s) || s[j] != '"' && s[j] != '\\' {
					return sfItem{}, i, errSF
				}
				b = append(b, s[j])
			case c == '"':
				return sfItem{kind: "string", str: string(b)}, j + 1, nil
			case c < 0x20 || c > 0x7e:
				return sfItem{}, i, errSF
			default:
				b = append(b, c)
			}
		}
		return sfItem{}, i, errSF
	case c == '?':
		if i+1 >= len(s) || s[i+1] != '0' && s[i+1] != '1' {
			return sfItem{}, i, errSF
		}
		return sfItem{kind: "boolean", n: int64(s[i+1] - '0')}, i + 2, nil
	case c == '*' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		j := i + 1
		for j < len(s) && (isTokenChar(s[j]) || s[j] == ':' || s[j] == '/' || s[j] == '!' || s[j] == '#' ||
			s[j] == '$' || s[j] == '%' || s[j] == '&' || s[j] == '\'' || s[j] == '*' || s[j] == '+' ||
			s[j] == '^' || s[j] == '`' || s[j] == '|' || s[j] == '~') {
			j++
		}
		return sfItem{kind: "token", str: s[i:j]}, j, nil
	}
	return sfItem{}, i, errSF
}

func TestStrictSFParser(t *testing.T) {
	for _, ok := range []string{`"a";q=1;w=2`, `"a";q=1, "b";q=2;w=3`, `"x\"y";r=0;t=999999999999999`, `tok;a;b=?0`} {
		if _, err := parseSFListStrict(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{`"a";q=1,`, `"a";q=1000000000000000`, `"a";Q=1`, `"a";q=1.5`, `"a`, `"a";q=1 "b"`, `"\x";q=1`, `"a";=1`} {
		if _, err := parseSFListStrict(bad); err == nil {
			t.Errorf("%s: parsed", bad)
		}
	}
}

// checkRateLimitFields parses the IETF fields of h strictly and checks
// their shape: RateLimit-Policy members are Strings with Integer q > 0
// and w > 0; RateLimit is one String naming one of them, with Integer
// r ≥ 0 and, if present, t ≥ 0.
func checkRateLimitFields(t *testing.T, h http.Header) {
	t.Helper()
	pol, err := parseSFListStrict(joinLines(h.Values("RateLimit-Policy")))
	if err != nil || len(pol) == 0 {
		t.Fatalf("RateLimit-Policy %q: %v", h.Values("RateLimit-Policy"), err)
	}
	names := map[string]bool{}
	for _, m := range pol {
		q, w := m.params["q"], m.params["w"]
		if m.item.kind != "string" || q.kind != "integer" || q.n <= 0 || w.kind != "integer" || w.n <= 0 {
			t.Fatalf("RateLimit-Policy %q: member %+v", h.Values("RateLimit-Policy"), m)
		}
		names[m.item.str] = true
	}
	rl, err := parseSFListStrict(joinLines(h.Values("RateLimit")))
	if err != nil || len(rl) != 1 {
		t.Fatalf("RateLimit %q: %v", h.Values("RateLimit"), err)
	}
	m := rl[0]
	r := m.params["r"]
	if m.item.kind != "string" || !names[m.item.str] || r.kind != "integer" || r.n < 0 {
		t.Fatalf("RateLimit %q: member %+v", h.Values("RateLimit"), m)
	}
	if tt, ok := m.params["t"]; ok {
		if tt.kind != "integer" || tt.n < 0 {
			t.Fatalf("RateLimit %q: t %+v", h.Values("RateLimit"), tt)
		}
	}
}

func joinLines(v []string) string {
	s := ""
	for i, l := range v {
		if i > 0 {
			s += ", "
		}
		s += l
	}
	return s
}

// TestRateLimitFieldsStrict sends allowed, denied and never-passing
// requests through every algorithm, with a global layer, and parses the
// fields with the strict parser. The policies include capacities beyond
// the 15 digits of an RFC 9651 Integer, which hotlimit accepts.
func TestRateLimitFieldsStrict(t *testing.T) {
	huge := hotlimit.Rate{N: 1_000_000_000, Per: time.Second}
	policies := map[string]hotlimit.Policy{
		"tb":        hotlimit.TokenBucket{Rate: hotlimit.PerSecond(3), Burst: 2},
		"fw":        hotlimit.FixedWindow{Limit: 3, Window: 10 * time.Second},
		"sw":        hotlimit.SlidingWindow{Limit: 3, Window: 7 * time.Second},
		"lb":        hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(2), Capacity: 1},
		"log":       hotlimit.SlidingLog{Limit: 3, Window: 5 * time.Second},
		"huge-tb":   hotlimit.TokenBucket{Rate: huge, Burst: 2_000_000_000_000_000},
		"huge-lb":   hotlimit.LeakyBucket{Rate: huge, Capacity: 2_000_000_000_000_000},
		"huge.fw_1": hotlimit.FixedWindow{Limit: 1<<43 - 1, Window: time.Hour},
	}
	for name := range policies {
		for _, global := range []string{"", "tb", "huge-tb"} {
			for _, cost := range []int64{1, 4} { // 4 exceeds the small ones: never passes
				hs := newHarness(t, Config{
					Limits:       policies,
					Groups:       []Group{{Name: "api", Limit: name, Cost: cost}},
					DefaultGroup: "api",
					Global:       global,
					Key:          TokenKey("Authorization"),
					Headers:      HeadersBoth,
				})
				for range 4 {
					w := hs.do("/", token)
					checkRateLimitFields(t, w.Header())
				}
			}
		}
	}
}
