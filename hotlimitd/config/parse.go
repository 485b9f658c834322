package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hotlimit/hotlimit"
	"gopkg.in/yaml.v3"
)

// maxNodes bounds the YAML nodes the parser visits in one file, aliases
// expanded: a file of a few aliases can otherwise stand for billions.
const maxNodes = 1 << 20

// maxErrors bounds the errors reported for one file.
const maxErrors = 100

// Parse reads one configuration file: data is its content and file its
// name, used in errors and in Limit.File. The file holds one domain, as
// envoyproxy/ratelimit's do, or several, each in its own YAML document
// (separated by ---). It returns every error of the file, each an
// *ErrConfig, joined with errors.Join, in the order of their lines (the
// first 100 found, after one that says there are more). A file whose YAML nodes, aliases expanded, number
// more than 2^20 (about 80,000 rules) is refused: a few aliases can
// stand for billions of nodes.
func Parse(file string, data []byte) (*Config, error) {
	c := &Config{domains: map[string]*domain{}}
	if errs := c.parse(file, data); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// parse adds the domains of one file to c and returns the file's errors.
// c is left in an unspecified state when there are any.
func (c *Config) parse(file string, data []byte) (errs []error) {
	p := &parser{file: file, c: c}
	defer func() {
		// yaml.v3 is not known to panic on any input since v3.0.1; should
		// it, the file is refused rather than the process brought down.
		if r := recover(); r != nil {
			errs = append(p.errs, &ErrConfig{File: file, Msg: fmt.Sprintf("cannot read the YAML (%v)", r)})
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	docs := 0
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if err == io.EOF {
			break
		}
		if err != nil {
			p.yamlError(err)
			break
		}
		if p.parseDocument(&doc) {
			docs++
		}
	}
	if docs == 0 && len(p.errs) == 0 {
		p.errorf(nil, "", "no domain: the file is empty")
	}
	// In the order of the file, as one reads it (the bound's notice,
	// line 0, first).
	slices.SortStableFunc(p.errs, func(a, b error) int {
		return a.(*ErrConfig).Line - b.(*ErrConfig).Line
	})
	return p.errs
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// yamlError reports a syntax error of the YAML itself, with its line.
func (p *parser) yamlError(err error) {
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	p.errs = append(p.errs, &ErrConfig{File: p.file, Line: line, Msg: "YAML: " + msg})
}

type parser struct {
	file  string
	c     *Config
	errs  []error
	nodes int // visited, against maxNodes
}

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	if len(p.errs) > maxErrors {
		return
	}
	if len(p.errs) == maxErrors {
		p.errs = append(p.errs, &ErrConfig{File: p.file, Msg: fmt.Sprintf("more than %d errors: the rest are not shown", maxErrors)})
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	p.errs = append(p.errs, &ErrConfig{File: p.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// resolve follows n's alias and counts the node it returns against
// maxNodes. It returns nil once the budget is spent (reporting it once).
func (p *parser) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i == 8 { // yaml.v3 anchors nodes, never aliases: not reached
			p.errorf(n, "", "alias of an alias")
			return nil
		}
		n = n.Alias
	}
	p.nodes++
	if p.nodes == maxNodes+1 {
		p.errorf(n, "", "more than %d YAML nodes (aliases expanded): refused", maxNodes)
	}
	if p.nodes > maxNodes {
		return nil
	}
	return n
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// fields calls f with each field of the mapping m. It refuses (and
// reports) a node that is not a mapping, a key that is not a string, a
// field given twice and YAML merge keys.
func (p *parser) fields(m *yaml.Node, path, want string, f func(name string, v *yaml.Node, field string)) bool {
	if m.Kind != yaml.MappingNode {
		if path == "" {
			p.errorf(m, path, "want a mapping with %s, got %s", want, kindName(m))
		} else {
			p.errorf(m, path, "want a mapping (%s), got %s", want, kindName(m))
		}
		return false
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := p.resolve(m.Content[i])
		if k == nil {
			return false
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			p.errorf(k, path, "a field's name must be a string, got %s", kindName(k))
			continue
		}
		name := k.Value
		field := join(path, name)
		if name == "<<" && k.ShortTag() == "!!merge" {
			p.errorf(k, path, "YAML merge keys (<<) are not supported: write the fields out, or alias a whole block")
			continue
		}
		if first, ok := seen[name]; ok {
			p.errorf(k, field, "given twice (first at line %d)", first)
			continue
		}
		seen[name] = k.Line
		v := p.resolve(m.Content[i+1])
		if v == nil {
			return false
		}
		f(name, v, field)
	}
	return true
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	case yaml.DocumentNode:
		return "a document"
	}
	return "an alias"
}

// str returns the text of a scalar: a key, a value, a name. Any scalar is
// its text as written (value: 0010 is "0010"); null is refused.
func (p *parser) str(v *yaml.Node, field string) (string, bool) {
	if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
		p.errorf(v, field, "want a string, got %s", kindName(v))
		return "", false
	}
	return v.Value, true
}

// text is str for a field that must not be empty: it reports ifEmpty
// for "".
func (p *parser) text(v *yaml.Node, field, ifEmpty string) (string, bool) {
	s, ok := p.str(v, field)
	if ok && s == "" {
		p.errorf(v, field, "%s", ifEmpty)
		return "", false
	}
	return s, ok
}

func (p *parser) boolean(v *yaml.Node, field string) (bool, bool) {
	var b bool
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || v.Decode(&b) != nil {
		p.errorf(v, field, "want true or false, got %s", kindName(v))
		return false, false
	}
	return b, true
}

func (p *parser) integer(v *yaml.Node, field string, lo, hi int64) (int64, bool) {
	var n int64
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || v.Decode(&n) != nil || n < lo || n > hi {
		p.errorf(v, field, "want an integer from %d to %d, got %s", lo, hi, kindName(v))
		return 0, false
	}
	return n, true
}

// parseDocument reads one domain, and reports whether the document held
// anything: an empty one (a file ending in "---", as envoyproxy/ratelimit
// loads it) is skipped.
func (p *parser) parseDocument(doc *yaml.Node) bool {
	if len(doc.Content) == 0 { // Decode always gives a DocumentNode
		return false
	}
	root := p.resolve(doc.Content[0])
	if root == nil {
		return true
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		if root.Value == "" {
			return false // nothing written: a document of comments only
		}
		p.errorf(root, "", "empty YAML document: want a domain")
		return true
	}
	var name string
	var nameNode, descs *yaml.Node
	ok := p.fields(root, "", "domain and descriptors", func(f string, v *yaml.Node, field string) {
		switch f {
		case "domain":
			if s, ok := p.text(v, field, "empty"); ok {
				name, nameNode = s, v
			}
		case "descriptors":
			descs = v
		default:
			p.errorf(v, field, "unknown field (a domain has domain and descriptors)")
		}
	})
	if !ok {
		return true
	}
	if nameNode == nil && !p.hasField(root, "domain") {
		p.errorf(root, "domain", "missing")
	}
	d := &domain{name: name, file: p.file, line: root.Line}
	b := &domainBuilder{d: d, names: map[string]bool{}}
	if nameNode != nil {
		d.line = nameNode.Line
		switch prev, dup := p.c.domains[name]; {
		case dup && p.c.builders != nil: // merging: this document's rules join the domain's
			d, b = prev, p.c.builders[name]
		case dup:
			p.errorf(nameNode, "domain", "%q is also at %s:%d", name, prev.file, prev.line)
		case name != "":
			p.c.domains[name] = d
			if p.c.builders != nil {
				p.c.builders[name] = b
			}
		}
	}
	if descs != nil {
		p.parseDescriptors(b, &d.root, descs, "descriptors", escape(name))
	}
	if p.c.builders == nil { // merging, build checks them once every file is read
		p.errs = append(p.errs, b.checkReplaces()...)
	}
	return true
}

// checkReplaces returns an error for each replaces of b's domain that
// names no rate_limit of it.
func (b *domainBuilder) checkReplaces() []error {
	var errs []error
	for _, r := range b.replaces {
		if !b.names[r.name] {
			q := &parser{file: r.file}
			q.errorf(r.n, r.field, "no rate_limit of domain %q is named %q", b.d.name, r.name)
			errs = append(errs, q.errs...)
		}
	}
	return errs
}

// domainBuilder collects what is checked once a domain is read.
type domainBuilder struct {
	d        *domain
	names    map[string]bool // every rate_limit name
	replaces []pendingReplace
}

type pendingReplace struct {
	name, field, file string
	n                 *yaml.Node
}

func (p *parser) parseDescriptors(b *domainBuilder, parent *node, seq *yaml.Node, field, path string) {
	if seq.Kind == yaml.ScalarNode && seq.ShortTag() == "!!null" {
		return // descriptors: with nothing after it is no descriptors
	}
	p.list(seq, field, "descriptors", func(item *yaml.Node, f string) {
		p.parseDescriptor(b, parent, item, f, path)
	})
}

// list calls f with each item of the list seq and its field; it refuses
// (and reports) a node that is not a list.
func (p *parser) list(seq *yaml.Node, field, want string, f func(item *yaml.Node, field string)) {
	if seq.Kind != yaml.SequenceNode {
		p.errorf(seq, field, "want a list of %s, got %s", want, kindName(seq))
		return
	}
	for i, item := range seq.Content {
		if item = p.resolve(item); item == nil {
			return
		}
		f(item, field+"["+strconv.Itoa(i)+"]")
	}
}

// descriptorFields are the fields of a descriptor as read: each node nil
// when the field is not given (or, for key and value, not given right).
type descriptorFields struct {
	key, value                          string
	keyNode, valueNode, rl, descs       *yaml.Node
	shadowNode, detailedNode, shareNode *yaml.Node
	shadow, detailed, share             bool
}

func (p *parser) parseDescriptor(b *domainBuilder, parent *node, m *yaml.Node, field, path string) {
	var d descriptorFields
	ok := p.fields(m, field, "key, value, rate_limit, descriptors, shadow_mode, detailed_metric, value_to_metric, share_threshold", func(f string, v *yaml.Node, fld string) {
		p.descriptorField(&d, f, v, fld)
	})
	if !ok {
		return
	}
	if d.keyNode == nil && !p.hasField(m, "key") {
		p.errorf(m, join(field, "key"), "missing")
	}
	wild := d.valueNode != nil && strings.HasSuffix(d.value, "*")
	child := &node{value: d.value, share: d.share && wild, file: p.file, line: m.Line}
	seg := escape(d.key)
	if d.valueNode != nil {
		seg += "=" + escape(d.value)
	}
	path += "/" + seg
	if d.share && !wild {
		p.errorf(d.shareNode, join(field, "share_threshold"), "only for a wildcard value (one that ends in *)")
	}
	p.descriptorLimit(b, child, &d, field, path)
	if d.descs != nil {
		p.parseDescriptors(b, child, d.descs, join(field, "descriptors"), path)
	}
	if d.keyNode == nil || d.valueNode == nil && p.hasField(m, "value") {
		return // reported: a key or value not given right places nothing
	}
	p.place(parent, child, &d, field)
}

// descriptorField reads field f of a descriptor, v at fld, into d.
func (p *parser) descriptorField(d *descriptorFields, f string, v *yaml.Node, fld string) {
	switch f {
	case "key":
		if s, ok := p.text(v, fld, "empty"); ok {
			d.key, d.keyNode = s, v
		}
	case "value":
		if s, ok := p.text(v, fld, "empty: leave value out for a rule that matches every value of its key"); ok {
			d.value, d.valueNode = s, v
		}
	case "rate_limit":
		d.rl = v
	case "descriptors":
		d.descs = v
	case "shadow_mode":
		d.shadow, _ = p.boolean(v, fld)
		d.shadowNode = v
	case "detailed_metric":
		d.detailed, _ = p.boolean(v, fld)
		d.detailedNode = v
	case "share_threshold":
		d.share, _ = p.boolean(v, fld)
		d.shareNode = v
	case "value_to_metric":
		// Read (it must be a boolean) and left: it names
		// envoyproxy/ratelimit's metrics after the request's value at
		// this level, and changes no decision; hotlimitd's metrics are
		// named after limits.
		p.boolean(v, fld)
	case "quota_mode":
		p.errorf(v, fld, "not supported: write shadow_mode to count without refusing, or a limit to refuse")
	default:
		p.errorf(v, fld, "unknown field (a descriptor has key, value, rate_limit, descriptors, shadow_mode, detailed_metric, value_to_metric and share_threshold)")
	}
}

// descriptorLimit reads the rate_limit of descriptor d at field into
// child, the descriptor's node, or reports the flags that then apply to
// nothing.
func (p *parser) descriptorLimit(b *domainBuilder, child *node, d *descriptorFields, field, path string) {
	if d.rl == nil {
		if d.shadow {
			p.errorf(d.shadowNode, join(field, "shadow_mode"), "no rate_limit here for it to apply to")
		}
		if d.detailed {
			p.errorf(d.detailedNode, join(field, "detailed_metric"), "no rate_limit here for it to apply to")
		}
		return
	}
	child.limit = p.parseRateLimit(b, d.rl, join(field, "rate_limit"), path, d.shadow, d.detailed)
	if child.limit != nil {
		p.c.limits = append(p.c.limits, child.limit)
	}
}

// place puts child, the node of descriptor d at field, under parent: by
// key and value (and among the wildcards for a value ending in *), or by
// key alone, refusing a rule parent already has.
func (p *parser) place(parent, child *node, d *descriptorFields, field string) {
	if d.valueNode == nil {
		if prev, dup := parent.keyOnly[d.key]; dup {
			p.errorf(d.keyNode, join(field, "key"), "a rule with key %q and no value is also at %s", d.key, prev.at(p.file))
			return
		}
		if parent.keyOnly == nil {
			parent.keyOnly = map[string]*node{}
		}
		parent.keyOnly[d.key] = child
		return
	}
	k := kv{d.key, d.value}
	if prev, dup := parent.exact[k]; dup {
		p.errorf(d.valueNode, join(field, "value"), "a rule with key %q and value %q is also at %s", d.key, d.value, prev.at(p.file))
		return
	}
	if parent.exact == nil {
		parent.exact = map[kv]*node{}
	}
	parent.exact[k] = child
	if strings.HasSuffix(d.value, "*") {
		parent.wild = append(parent.wild, wildcard{key: d.key, prefix: d.value[:len(d.value)-1], n: child})
	}
}

// hasField reports whether mapping m has field, whatever its value: a
// field with a bad value is reported once, for its value, not also as
// missing.
func (p *parser) hasField(m *yaml.Node, field string) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == field {
			return true
		}
	}
	return false
}

var unitByName = map[string]Unit{}

func init() {
	for u := Second; u <= Week; u++ {
		unitByName[u.String()] = u
	}
}

// rateLimitNodes are the fields of a rate_limit that were given, which
// the checks after reading them name.
type rateLimitNodes struct {
	unit, rpu, alg, burst, cost *yaml.Node
}

func (p *parser) parseRateLimit(b *domainBuilder, m *yaml.Node, field, path string, shadow, detailed bool) *Limit {
	l := &Limit{Domain: b.d.name, Shadow: shadow, DetailedMetric: detailed, File: p.file, Line: m.Line, Cost: 1}
	var n rateLimitNodes
	before := len(p.errs)
	ok := p.fields(m, field, "unit and requests_per_unit, or unlimited: true", func(f string, v *yaml.Node, fld string) {
		p.rateLimitField(b, l, &n, f, v, fld)
	})
	if !ok {
		return nil
	}
	for _, r := range l.Replaces {
		if r == l.RuleName {
			p.errorf(m, join(field, "replaces"), "replaces its own name %q", r)
		}
	}
	if l.Unlimited {
		p.unused(field, "not with unlimited: true (an unlimited rule never counts)",
			namedNode{n.unit, "unit"}, namedNode{n.rpu, "requests_per_unit"}, namedNode{n.alg, "algorithm"}, namedNode{n.burst, "burst"}, namedNode{n.cost, "cost"})
		l.Unit, l.RequestsPerUnit, l.Algorithm, l.Burst, l.Cost = 0, 0, FixedWindow, 0, 0
		l.Name = path + "#unlimited"
		return l
	}
	if n.unit == nil {
		p.errorf(m, join(field, "unit"), "missing (or write unlimited: true)")
	}
	if n.rpu == nil {
		p.errorf(m, join(field, "requests_per_unit"), "missing (0 refuses every hit)")
	}
	if len(p.errs) > before {
		// A field that is missing or wrong leaves nothing to check the
		// others against (a misspelt algorithm is no reason to call its
		// burst misplaced).
		return l
	}
	bucket := l.Algorithm == TokenBucket || l.Algorithm == LeakyBucket
	if n.burst != nil && !bucket {
		p.errorf(n.burst, join(field, "burst"), "only for token_bucket and leaky_bucket (a window's capacity is requests_per_unit)")
	}
	if l.RequestsPerUnit == 0 {
		p.unused(field, "has no effect: requests_per_unit 0 refuses every hit",
			namedNode{n.alg, "algorithm"}, namedNode{n.burst, "burst"}, namedNode{n.cost, "cost"})
		l.Algorithm, l.Burst = FixedWindow, 0
		l.Name = path + "#refuse"
		return l
	}
	p.setPolicy(l, m, n.cost, field, path)
	return l
}

// rateLimitField reads field f of a rate_limit, v at fld, into l, and
// notes in n the fields that were given.
func (p *parser) rateLimitField(b *domainBuilder, l *Limit, n *rateLimitNodes, f string, v *yaml.Node, fld string) {
	switch f {
	case "unit":
		n.unit = v
		if u, ok := p.unit(v, fld); ok {
			l.Unit = u
		}
	case "requests_per_unit":
		n.rpu = v
		if r, ok := p.integer(v, fld, 0, math.MaxUint32); ok {
			l.RequestsPerUnit = uint32(r)
		}
	case "unlimited":
		l.Unlimited, _ = p.boolean(v, fld)
	case "name":
		if s, ok := p.text(v, fld, "empty"); ok {
			l.RuleName = s
			b.names[s] = true
		}
	case "replaces":
		p.parseReplaces(b, l, v, fld)
	case "algorithm":
		n.alg = v
		if a, ok := p.algorithm(v, fld); ok {
			l.Algorithm = a
		}
	case "burst":
		n.burst = v
		l.Burst, _ = p.integer(v, fld, 1, math.MaxInt64)
	case "cost":
		n.cost = v
		if c, ok := p.integer(v, fld, 1, math.MaxInt64); ok {
			l.Cost = c
		}
	default:
		p.errorf(v, fld, "unknown field (a rate_limit has unit, requests_per_unit, unlimited, name, replaces, algorithm, burst and cost)")
	}
}

// unit reads a rate_limit's unit, in any case.
func (p *parser) unit(v *yaml.Node, field string) (Unit, bool) {
	s, ok := p.str(v, field)
	if !ok {
		return 0, false
	}
	u, ok := unitByName[strings.ToLower(s)]
	if !ok {
		p.errorf(v, field, "unknown unit %q (want second, minute, hour, day, week, month or year)", s)
	}
	return u, ok
}

// algorithm reads a rate_limit's algorithm.
func (p *parser) algorithm(v *yaml.Node, field string) (Algorithm, bool) {
	s, ok := p.str(v, field)
	if !ok {
		return 0, false
	}
	a, ok := algorithmByName[s]
	switch {
	case ok:
	case s == "concurrency":
		p.errorf(v, field, "concurrency limits are not supported: the rate limit service protocol has no call to release a request when it ends")
	default:
		p.errorf(v, field, "unknown algorithm %q (want fixed_window, sliding_window, sliding_log, token_bucket or leaky_bucket)", s)
	}
	return a, ok
}

// namedNode is a field's value and its name, nil when it is not given.
type namedNode struct {
	n    *yaml.Node
	name string
}

// unused reports msg for each of the fields of the mapping at field that
// is given.
func (p *parser) unused(field, msg string, fs ...namedNode) {
	for _, f := range fs {
		if f.n != nil {
			p.errorf(f.n, join(field, f.name), "%s", msg)
		}
	}
}

// setPolicy gives l, a rate_limit m at field that counts, its burst, its
// policy and its Name, and reports a policy hotlimit refuses and a cost
// (costNode, nil when not given) above the policy's capacity.
func (p *parser) setPolicy(l *Limit, m, costNode *yaml.Node, field, path string) {
	bucket := l.Algorithm == TokenBucket || l.Algorithm == LeakyBucket
	if bucket && l.Burst == 0 {
		l.Burst = int64(l.RequestsPerUnit)
	}
	if !bucket {
		l.Burst = 0
	}
	n, w := int64(l.RequestsPerUnit), l.Unit.Duration()
	switch l.Algorithm {
	case FixedWindow:
		l.Policy = hotlimit.FixedWindow{Limit: n, Window: w}
	case SlidingWindow:
		l.Policy = hotlimit.SlidingWindow{Limit: n, Window: w}
	case SlidingLog:
		l.Policy = hotlimit.SlidingLog{Limit: n, Window: w}
	case TokenBucket:
		l.Policy = hotlimit.TokenBucket{Rate: hotlimit.Rate{N: n, Per: w}, Burst: l.Burst}
	case LeakyBucket:
		l.Policy = hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: n, Per: w}, Capacity: l.Burst - 1}
	}
	info, err := hotlimit.Describe(l.Policy)
	if err != nil {
		p.errorf(m, field, "%s %d per %s: %v", l.Algorithm, n, l.Unit, err)
		l.Policy = nil
		return
	}
	if l.Cost > info.Limit {
		p.errorf(costNode, join(field, "cost"), "%d exceeds the limit's capacity %d: every hit would be refused", l.Cost, info.Limit)
	}
	l.Name = path + "#" + policyName(l)
}

// policyName is the part of a Limit's Name that changes with its policy.
func policyName(l *Limit) string {
	s := l.Algorithm.String() + ":" + strconv.FormatUint(uint64(l.RequestsPerUnit), 10) + "/" + l.Unit.String()
	if l.Algorithm == TokenBucket || l.Algorithm == LeakyBucket {
		s += ",burst=" + strconv.FormatInt(l.Burst, 10)
	}
	return s
}

var algorithmByName = map[string]Algorithm{}

func init() {
	for a := FixedWindow; a <= LeakyBucket; a++ {
		algorithmByName[a.String()] = a
	}
}

func (p *parser) parseReplaces(b *domainBuilder, l *Limit, seq *yaml.Node, field string) {
	p.list(seq, field, "{name: ...}", func(item *yaml.Node, f string) {
		var name *yaml.Node
		p.fields(item, f, "name", func(n string, v *yaml.Node, fld string) {
			if n != "name" {
				p.errorf(v, fld, "unknown field (a replaces entry has name)")
				return
			}
			if s, ok := p.text(v, fld, "empty"); ok {
				name = v
				l.Replaces = append(l.Replaces, s)
				b.replaces = append(b.replaces, pendingReplace{name: s, field: fld, file: p.file, n: v})
			}
		})
		if name == nil && item.Kind == yaml.MappingNode && !p.hasField(item, "name") {
			p.errorf(item, join(f, "name"), "missing")
		}
	})
}

// escape writes s for a Limit's Name: '%', '/', '=', '#', braces, spaces,
// control bytes and non-ASCII bytes as %XX, so that the separators of a
// Name are never part of a key, value or domain, and a Name has no brace
// (redislimit refuses them in limit names: they delimit Redis Cluster
// hash tags).
func escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func needsEscape(c byte) bool {
	return c <= ' ' || c >= 0x7f || c == '%' || c == '/' || c == '=' || c == '#' || c == '{' || c == '}'
}
