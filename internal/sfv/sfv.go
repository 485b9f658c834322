// Package sfv parses Structured Field Lists (RFC 9651, section 4.2), the
// form of the RateLimit and RateLimit-Policy fields: httpretry reads them
// from a server's responses, and httplimit's tests read the fields the
// middleware writes with it.
//
// The parser is strict, as RFC 9651 requires of a recipient: every
// bare-item type is recognised and validated, and a field that does not
// parse fails as a whole (ParseList returns ErrSyntax and no members).
// A caller then ignores the field, as if it were absent.
package sfv

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// ErrSyntax reports a field value that is not a valid List.
var ErrSyntax = errors.New("sfv: malformed structured field")

// Kind is the type of a bare item.
type Kind uint8

// The bare-item types of RFC 9651, section 3.3.
const (
	Integer Kind = iota + 1
	Decimal
	String
	Token
	ByteSequence
	Boolean
	Date
	DisplayString
)

// MaxInteger is the largest Integer (15 digits); -MaxInteger is the
// smallest.
const MaxInteger = 999_999_999_999_999

// Value is a bare item.
type Value struct {
	Kind Kind
	// Int is an Integer's or a Date's value, a Boolean's 0 or 1, and a
	// Decimal's value times 1000 (it has at most three fractional
	// digits, so this is exact).
	Int int64
	// Str is a String's or a Display String's decoded value, a Token, or
	// a Byte Sequence's base64 text (validated for its alphabet, not
	// decoded).
	Str string
}

// Param is one parameter: a key and its bare item.
type Param struct {
	Key   string
	Value Value
}

// Params are the parameters of an Item or an Inner List, in order of
// first appearance; a repeated key keeps its last value, in its first
// position (RFC 9651, 4.2.3.2).
type Params []Param

// Get returns the value of the parameter key and reports whether there
// is one.
func (ps Params) Get(key string) (Value, bool) {
	for _, p := range ps {
		if p.Key == key {
			return p.Value, true
		}
	}
	return Value{}, false
}

// Item is a bare item with its parameters.
type Item struct {
	Value  Value
	Params Params
}

// Member is one member of a List: an Item, or an Inner List when IsInner
// is set (Value is then zero and Inner holds its items).
type Member struct {
	IsInner bool
	Value   Value
	Inner   []Item
	Params  Params // the Item's or the Inner List's parameters
}

// ParseList parses a List field value. Several field lines must be
// joined with "," first, as RFC 9651 section 4.2 prescribes. An empty
// value is an empty List.
func ParseList(s string) ([]Member, error) {
	p := parser{s: s}
	p.skipSP()
	if len(p.s) == 0 {
		return nil, nil
	}
	// Room for a typical field (two policies, three parameters each)
	// in two allocations.
	list := make([]Member, 0, 2)
	p.ps = make(Params, 0, 6)
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
			return nil, ErrSyntax
		}
		p.s = p.s[1:]
		p.skipOWS()
		if len(p.s) == 0 {
			return nil, ErrSyntax // a trailing comma
		}
	}
	return list, nil
}

// parser holds the unparsed remainder of a field value, and the backing
// array that every Params of the value is a slice of.
type parser struct {
	s  string
	ps Params
}

func (p *parser) skipSP() {
	for len(p.s) > 0 && p.s[0] == ' ' {
		p.s = p.s[1:]
	}
}

func (p *parser) skipOWS() {
	for len(p.s) > 0 && (p.s[0] == ' ' || p.s[0] == '\t') {
		p.s = p.s[1:]
	}
}

func (p *parser) member() (Member, error) {
	if len(p.s) > 0 && p.s[0] == '(' {
		return p.innerList()
	}
	it, err := p.item()
	if err != nil {
		return Member{}, err
	}
	return Member{Value: it.Value, Params: it.Params}, nil
}

func (p *parser) item() (Item, error) {
	v, err := p.bareItem()
	if err != nil {
		return Item{}, err
	}
	params, err := p.params()
	if err != nil {
		return Item{}, err
	}
	return Item{Value: v, Params: params}, nil
}

func (p *parser) innerList() (Member, error) {
	p.s = p.s[1:] // '('
	var items []Item
	for len(p.s) > 0 {
		p.skipSP()
		if len(p.s) > 0 && p.s[0] == ')' {
			p.s = p.s[1:]
			params, err := p.params()
			if err != nil {
				return Member{}, err
			}
			return Member{IsInner: true, Inner: items, Params: params}, nil
		}
		it, err := p.item()
		if err != nil {
			return Member{}, err
		}
		items = append(items, it)
		if len(p.s) == 0 || (p.s[0] != ' ' && p.s[0] != ')') {
			return Member{}, ErrSyntax
		}
	}
	return Member{}, ErrSyntax // no closing parenthesis
}

func (p *parser) params() (Params, error) {
	start := len(p.ps)
	for len(p.s) > 0 && p.s[0] == ';' {
		p.s = p.s[1:]
		p.skipSP()
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		value := Value{Kind: Boolean, Int: 1} // a bare key is true
		if len(p.s) > 0 && p.s[0] == '=' {
			p.s = p.s[1:]
			if value, err = p.bareItem(); err != nil {
				return nil, err
			}
		}
		p.setParam(start, key, value)
	}
	if len(p.ps) == start {
		return nil, nil
	}
	return p.ps[start:len(p.ps):len(p.ps)], nil // full: an append copies
}

// setParam overwrites key's value among the parameters from start on, in
// place, or appends it.
func (p *parser) setParam(start int, key string, v Value) {
	for i := start; i < len(p.ps); i++ {
		if p.ps[i].Key == key {
			p.ps[i].Value = v
			return
		}
	}
	p.ps = append(p.ps, Param{Key: key, Value: v})
}

func (p *parser) key() (string, error) {
	if len(p.s) == 0 || !(isLCAlpha(p.s[0]) || p.s[0] == '*') {
		return "", ErrSyntax
	}
	i := 1
	for i < len(p.s) && isKeyChar(p.s[i]) {
		i++
	}
	k := p.s[:i]
	p.s = p.s[i:]
	return k, nil
}

func (p *parser) bareItem() (Value, error) {
	if len(p.s) == 0 {
		return Value{}, ErrSyntax
	}
	switch c := p.s[0]; {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case c == '*' || isAlpha(c):
		return p.token(), nil
	case c == ':':
		return p.bytes()
	case c == '?':
		if len(p.s) < 2 || (p.s[1] != '0' && p.s[1] != '1') {
			return Value{}, ErrSyntax
		}
		n := int64(p.s[1] - '0')
		p.s = p.s[2:]
		return Value{Kind: Boolean, Int: n}, nil
	case c == '@':
		p.s = p.s[1:]
		v, err := p.number()
		if err != nil || v.Kind != Integer {
			return Value{}, ErrSyntax
		}
		return Value{Kind: Date, Int: v.Int}, nil
	case c == '%':
		return p.display()
	}
	return Value{}, ErrSyntax
}

// number parses an Integer (at most 15 digits) or a Decimal (at most 12
// integer and 3 fractional digits).
func (p *parser) number() (Value, error) {
	i, neg := 0, false
	if len(p.s) == 0 {
		return Value{}, ErrSyntax // "@" at the end
	}
	if p.s[0] == '-' {
		neg, i = true, 1
	}
	if i >= len(p.s) || !isDigit(p.s[i]) {
		return Value{}, ErrSyntax
	}
	var n int64
	digits, dot := 0, -1 // dot: index in p.s of the decimal point
	for ; i < len(p.s); i++ {
		c := p.s[i]
		if isDigit(c) {
			digits++
			n = n*10 + int64(c-'0') // at most 15 digits: no overflow
		} else if c == '.' && dot < 0 {
			if digits > 12 {
				return Value{}, ErrSyntax
			}
			dot = i
		} else {
			break
		}
		if digits > 15 { // RFC 9651: 15 digits for either type
			return Value{}, ErrSyntax
		}
	}
	if neg {
		n = -n
	}
	p.s = p.s[i:]
	if dot < 0 {
		return Value{Kind: Integer, Int: n}, nil
	}
	frac := i - dot - 1
	if frac == 0 || frac > 3 {
		return Value{}, ErrSyntax
	}
	for ; frac < 3; frac++ {
		n *= 10
	}
	return Value{Kind: Decimal, Int: n}, nil
}

// str parses a String. Its value is a substring of the input unless it
// holds escapes.
func (p *parser) str() (Value, error) {
	var b []byte // the value so far, once an escape is seen
	for i := 1; i < len(p.s); i++ {
		switch c := p.s[i]; {
		case c == '\\':
			if b == nil {
				b = append(make([]byte, 0, len(p.s)), p.s[1:i]...)
			}
			i++
			if i >= len(p.s) || (p.s[i] != '"' && p.s[i] != '\\') {
				return Value{}, ErrSyntax
			}
			b = append(b, p.s[i])
		case c == '"':
			v := p.s[1:i]
			if b != nil {
				v = string(b)
			}
			p.s = p.s[i+1:]
			return Value{Kind: String, Str: v}, nil
		case c < 0x20 || c > 0x7e:
			return Value{}, ErrSyntax
		default:
			if b != nil {
				b = append(b, c)
			}
		}
	}
	return Value{}, ErrSyntax // unterminated
}

func (p *parser) token() Value {
	i := 1
	for i < len(p.s) && (isTChar(p.s[i]) || p.s[i] == ':' || p.s[i] == '/') {
		i++
	}
	v := p.s[:i]
	p.s = p.s[i:]
	return Value{Kind: Token, Str: v}
}

func (p *parser) bytes() (Value, error) {
	for i := 1; i < len(p.s); i++ {
		switch c := p.s[i]; {
		case c == ':':
			v := p.s[1:i]
			p.s = p.s[i+1:]
			return Value{Kind: ByteSequence, Str: v}, nil
		case !(isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '='):
			return Value{}, ErrSyntax
		}
	}
	return Value{}, ErrSyntax
}

// display parses a Display String: %"..." with %xx lowercase hex escapes
// that must decode to valid UTF-8.
func (p *parser) display() (Value, error) {
	if len(p.s) < 2 || p.s[1] != '"' {
		return Value{}, ErrSyntax
	}
	var b strings.Builder
	for i := 2; i < len(p.s); i++ {
		switch c := p.s[i]; {
		case c == '%':
			if i+2 >= len(p.s) || !isLCHex(p.s[i+1]) || !isLCHex(p.s[i+2]) {
				return Value{}, ErrSyntax
			}
			b.WriteByte(unhex(p.s[i+1])<<4 | unhex(p.s[i+2]))
			i += 2
		case c == '"':
			if !utf8.ValidString(b.String()) {
				return Value{}, ErrSyntax
			}
			p.s = p.s[i+1:]
			return Value{Kind: DisplayString, Str: b.String()}, nil
		case c < 0x20 || c > 0x7e:
			return Value{}, ErrSyntax
		default:
			b.WriteByte(c)
		}
	}
	return Value{}, ErrSyntax
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
