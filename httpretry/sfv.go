package httpretry

// This file parses Structured Field Lists (RFC 9651, section 4.2) far
// enough to read the RateLimit field: every bare-item type is recognised
// and validated, but only Integers keep their value, since r and t are all
// the client needs. A field that does not parse is malformed as a whole,
// as RFC 9651 requires, and the caller ignores it.

import (
	"errors"
	"unicode/utf8"
)

// errSyntax reports a Structured Field that does not parse.
var errSyntax = errors.New("httpretry: malformed structured field")

// sfKind is the type of a bare item.
type sfKind uint8

const (
	sfInteger sfKind = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBytes
	sfBoolean
	sfDate
	sfDisplay
)

// sfItem is a parsed bare item. Only an Integer's value is kept (in n).
type sfItem struct {
	kind sfKind
	n    int64
}

// sfParam is one parameter of an item: a key and its bare item.
type sfParam struct {
	key   string
	value sfItem
}

// sfMember is one member of a List: an Item, or an Inner List (inner is
// then true and the item is meaningless).
type sfMember struct {
	inner  bool
	item   sfItem
	params []sfParam
}

// param returns the value of the parameter key and reports whether the
// member has it. A repeated key keeps its last value (RFC 9651, 4.2.3.2).
func (m *sfMember) param(key string) (sfItem, bool) {
	for i := len(m.params) - 1; i >= 0; i-- {
		if m.params[i].key == key {
			return m.params[i].value, true
		}
	}
	return sfItem{}, false
}

// sfParser holds the unparsed remainder of a field value.
type sfParser struct {
	s string
}

// parseSFList parses a List field value. Several field lines must be
// joined with "," first, as RFC 9651 section 4.2 prescribes.
func parseSFList(s string) ([]sfMember, error) {
	p := sfParser{s: s}
	p.skipSP()
	var list []sfMember
	for len(p.s) > 0 {
		m, err := p.member()
		if err != nil {
			return nil, err
		}
		list = append(list, m)
		p.skipOWS()
		if len(p.s) == 0 {
			return list, nil
		}
		if p.s[0] != ',' {
			return nil, errSyntax
		}
		p.s = p.s[1:]
		p.skipOWS()
		if len(p.s) == 0 {
			return nil, errSyntax // a trailing comma
		}
	}
	return list, nil
}

func (p *sfParser) skipSP() {
	for len(p.s) > 0 && p.s[0] == ' ' {
		p.s = p.s[1:]
	}
}

func (p *sfParser) skipOWS() {
	for len(p.s) > 0 && (p.s[0] == ' ' || p.s[0] == '\t') {
		p.s = p.s[1:]
	}
}

func (p *sfParser) member() (sfMember, error) {
	if len(p.s) > 0 && p.s[0] == '(' {
		return p.innerList()
	}
	it, err := p.bareItem()
	if err != nil {
		return sfMember{}, err
	}
	params, err := p.params()
	if err != nil {
		return sfMember{}, err
	}
	return sfMember{item: it, params: params}, nil
}

func (p *sfParser) innerList() (sfMember, error) {
	p.s = p.s[1:] // '('
	for len(p.s) > 0 {
		p.skipSP()
		if len(p.s) > 0 && p.s[0] == ')' {
			p.s = p.s[1:]
			params, err := p.params()
			if err != nil {
				return sfMember{}, err
			}
			return sfMember{inner: true, params: params}, nil
		}
		if _, err := p.bareItem(); err != nil {
			return sfMember{}, err
		}
		if _, err := p.params(); err != nil {
			return sfMember{}, err
		}
		if len(p.s) == 0 || (p.s[0] != ' ' && p.s[0] != ')') {
			return sfMember{}, errSyntax
		}
	}
	return sfMember{}, errSyntax // no closing parenthesis
}

func (p *sfParser) params() ([]sfParam, error) {
	var params []sfParam
	for len(p.s) > 0 && p.s[0] == ';' {
		p.s = p.s[1:]
		p.skipSP()
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		value := sfItem{kind: sfBoolean, n: 1} // a bare key is true
		if len(p.s) > 0 && p.s[0] == '=' {
			p.s = p.s[1:]
			if value, err = p.bareItem(); err != nil {
				return nil, err
			}
		}
		params = append(params, sfParam{key: key, value: value})
	}
	return params, nil
}

func (p *sfParser) key() (string, error) {
	if len(p.s) == 0 || !(isLCAlpha(p.s[0]) || p.s[0] == '*') {
		return "", errSyntax
	}
	i := 1
	for i < len(p.s) && isKeyChar(p.s[i]) {
		i++
	}
	k := p.s[:i]
	p.s = p.s[i:]
	return k, nil
}

func (p *sfParser) bareItem() (sfItem, error) {
	if len(p.s) == 0 {
		return sfItem{}, errSyntax
	}
	switch c := p.s[0]; {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return sfItem{kind: sfString}, p.str()
	case c == '*' || isAlpha(c):
		p.token()
		return sfItem{kind: sfToken}, nil
	case c == ':':
		return sfItem{kind: sfBytes}, p.bytes()
	case c == '?':
		if len(p.s) < 2 || (p.s[1] != '0' && p.s[1] != '1') {
			return sfItem{}, errSyntax
		}
		n := int64(p.s[1] - '0')
		p.s = p.s[2:]
		return sfItem{kind: sfBoolean, n: n}, nil
	case c == '@':
		p.s = p.s[1:]
		it, err := p.number()
		if err != nil || it.kind != sfInteger {
			return sfItem{}, errSyntax
		}
		return sfItem{kind: sfDate, n: it.n}, nil
	case c == '%':
		return sfItem{kind: sfDisplay}, p.display()
	}
	return sfItem{}, errSyntax
}

// number parses an Integer (at most 15 digits) or a Decimal (at most 12
// integer and 3 fractional digits).
func (p *sfParser) number() (sfItem, error) {
	i, neg := 0, false
	if len(p.s) == 0 {
		return sfItem{}, errSyntax // "@" at the end
	}
	if p.s[0] == '-' {
		neg, i = true, 1
	}
	if i >= len(p.s) || !isDigit(p.s[i]) {
		return sfItem{}, errSyntax
	}
	var n int64
	digits, dot := 0, -1 // dot: index in p.s of the decimal point
	for ; i < len(p.s); i++ {
		c := p.s[i]
		if isDigit(c) {
			digits++
			if dot < 0 {
				n = n*10 + int64(c-'0') // at most 15 digits: no overflow
			}
		} else if c == '.' && dot < 0 {
			if digits > 12 {
				return sfItem{}, errSyntax
			}
			dot = i
		} else {
			break
		}
		if digits > 15 { // RFC 9651: 15 digits for either type
			return sfItem{}, errSyntax
		}
	}
	if dot >= 0 {
		frac := i - dot - 1
		if frac == 0 || frac > 3 {
			return sfItem{}, errSyntax
		}
		p.s = p.s[i:]
		return sfItem{kind: sfDecimal}, nil
	}
	if neg {
		n = -n
	}
	p.s = p.s[i:]
	return sfItem{kind: sfInteger, n: n}, nil
}

func (p *sfParser) str() error {
	for i := 1; i < len(p.s); i++ {
		switch c := p.s[i]; {
		case c == '\\':
			i++
			if i >= len(p.s) || (p.s[i] != '"' && p.s[i] != '\\') {
				return errSyntax
			}
		case c == '"':
			p.s = p.s[i+1:]
			return nil
		case c < 0x20 || c > 0x7e:
			return errSyntax
		}
	}
	return errSyntax // unterminated
}

func (p *sfParser) token() {
	i := 1
	for i < len(p.s) && (isTChar(p.s[i]) || p.s[i] == ':' || p.s[i] == '/') {
		i++
	}
	p.s = p.s[i:]
}

func (p *sfParser) bytes() error {
	for i := 1; i < len(p.s); i++ {
		switch c := p.s[i]; {
		case c == ':':
			p.s = p.s[i+1:]
			return nil
		case !(isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '='):
			return errSyntax
		}
	}
	return errSyntax
}

// display parses a Display String: %"..." with %xx lowercase hex escapes
// that must decode to valid UTF-8.
func (p *sfParser) display() error {
	if len(p.s) < 2 || p.s[1] != '"' {
		return errSyntax
	}
	var buf []byte
	for i := 2; i < len(p.s); i++ {
		switch c := p.s[i]; {
		case c == '%':
			if i+2 >= len(p.s) || !isLCHex(p.s[i+1]) || !isLCHex(p.s[i+2]) {
				return errSyntax
			}
			buf = append(buf, unhex(p.s[i+1])<<4|unhex(p.s[i+2]))
			i += 2
		case c == '"':
			if !utf8.Valid(buf) {
				return errSyntax
			}
			p.s = p.s[i+1:]
			return nil
		case c < 0x20 || c > 0x7e:
			return errSyntax
		default:
			buf = append(buf, c)
		}
	}
	return errSyntax
}

func isDigit(c byte) bool   { return '0' <= c && c <= '9' }
func isLCAlpha(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || 'A' <= c && c <= 'Z' }
func isLCHex(c byte) bool   { return isDigit(c) || 'a' <= c && c <= 'f' }

func isKeyChar(c byte) bool {
	return isLCAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*'
}

// isTChar reports whether c is an RFC 9110 tchar.
func isTChar(c byte) bool {
	if isAlpha(c) || isDigit(c) {
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

func unhex(c byte) byte {
	if isDigit(c) {
		return c - '0'
	}
	return c - 'a' + 10
}
