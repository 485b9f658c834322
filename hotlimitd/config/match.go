package config

import (
	"encoding/binary"
	"strings"
)

// Match finds the limit for one descriptor of a request to domain, by
// envoyproxy/ratelimit's rules. Each entry, in order, picks one rule among
// the children of the rule the previous entry picked (the domain's rules
// for the first): the rule with the entry's key and value; else the first
// rule, in file order, with the entry's key and a wildcard value (one
// ending in *) whose prefix starts the entry's value; else the rule with
// the entry's key and no value. The descriptor matches when every entry
// picks a rule and the last one has a rate_limit: a descriptor with more
// or fewer entries than the rules' nesting does not match. The search
// stops at the first entry that picks nothing, or whose rule has no
// children while entries remain.
//
// On a match, Match appends to dst the key the limit counts this
// descriptor under, and returns the extended slice: the values of the
// entries, each length-prefixed, so that no two descriptors share a key
// unless they are the same (the limit's Name fixes the domain and the
// keys). A key-only rule thus counts each value apart, as does a wildcard
// rule, unless it has share_threshold: then every value it matches counts
// under its written value. ok is false when nothing matches (the
// descriptor is not limited); key is then dst. Match does not allocate
// when dst has room for the key.
func (c *Config) Match(dst []byte, domain string, entries []Entry) (l *Limit, key []byte, ok bool) {
	d := c.domains[domain]
	if d == nil || len(entries) == 0 {
		return nil, dst, false
	}
	key = dst
	n := &d.root
	for i, e := range entries {
		next := n.exact[kv{e.Key, e.Value}]
		if next == nil {
			for _, w := range n.wild {
				if w.key == e.Key && strings.HasPrefix(e.Value, w.prefix) {
					next = w.n
					break
				}
			}
		}
		if next == nil {
			next = n.keyOnly[e.Key]
		}
		if next == nil {
			return nil, dst, false
		}
		v := e.Value
		if next.share {
			v = next.value
		}
		key = binary.AppendUvarint(key, uint64(len(v)))
		key = append(key, v...)
		if i == len(entries)-1 {
			if next.limit == nil {
				return nil, dst, false
			}
			return next.limit, key, true
		}
		if !next.hasChildren() {
			return nil, dst, false
		}
		n = next
	}
	return nil, dst, false // not reached: entries is not empty
}
