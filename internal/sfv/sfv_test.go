package sfv

import (
	"reflect"
	"testing"
)

// TestParseList checks the parser on RFC 9651's examples and the edge
// cases of each bare-item type.
func TestParseList(t *testing.T) {
	valid := map[string]int{ // input: number of members
		``:                0,
		`   `:             0,
		`sugar, tea, rum`: 3,
		`sugar,tea,rum`:   3,
		"a,\tb":           2,
		`("foo" "bar"), ("baz"), ("bat" "one"), ()`:      4,
		`("foo"; a=1;b=2);lvl=5, ("bar" "baz");lvl=1`:    2,
		`abc;a=1;b=2; cde_456, (ghi;jk=4 l);q="9";r=w`:   2,
		`1;a=?0, -42, 3.14, -0.5, 123456789012345`:       5,
		`:cHJldGVuZCB0aGlzIGlzIGJpbmFyeSBjb250ZW50Lg==:`: 1,
		`?1, ?0, @1659578233, @-5`:                       4,
		`%"This is intended for display to %c3%bcsers."`: 1,
		`"\"quoted\" \\ text"`:                           1,
		`*foo/bar:baz`:                                   1,
		`a;*=1;b.c-d_e*=2`:                               1,
		`"a";q=1;w=2`:                                    1,
		`"a";q=1, "b";q=2;w=3`:                           2,
		`"x\"y";r=0;t=999999999999999`:                   1,
		`tok;a;b=?0`:                                     1,
	}
	for in, n := range valid {
		list, err := ParseList(in)
		if err != nil || len(list) != n {
			t.Errorf("ParseList(%q) = %d members, %v; want %d", in, len(list), err, n)
		}
	}
	invalid := []string{
		`a,`, `,a`, `a,,b`, `a b`, `"unterminated`, `"bad\escape"`, "\"tab\there\"",
		`1234567890123456`, `1234567890123.1`, `1.1234`, `1.`, `-`, `--1`, `?2`, `?`,
		`@1.5`, `@`, `a;b=@`, `:not base64!:`, `:unterminated`, `%"bad %ZZ"`, `%"bad %c3"`, `%x`,
		`(a b`, `(a,b)`, `a;A=1`, `a;1=2`, `a;=1`, `a;b=`, `é`, "\tleading-tab", `a;b=(c)`,
		`"a";q=1,`, `"a";q=1000000000000000`, `"a";Q=1`, `"a`, `"a";q=1 "b"`, `"\x";q=1`, `"a";=1`,
	}
	for _, in := range invalid {
		if list, err := ParseList(in); err == nil {
			t.Errorf("ParseList(%q) = %d members, want an error", in, len(list))
		}
	}
}

// TestValues checks the decoded value of each bare-item type, and that a
// repeated parameter keeps its last value in its first position.
func TestValues(t *testing.T) {
	list, err := ParseList(`a;q=-42;r=7;s=1.5;t;q=9, "x\"y\\z";d=@-5;n=-0.25, %"%c3%bc";b=:AQ==:, ("in" 2;k);p=?0`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Member{
		{Value: Value{Kind: Token, Str: "a"}, Params: Params{
			{"q", Value{Kind: Integer, Int: 9}}, {"r", Value{Kind: Integer, Int: 7}},
			{"s", Value{Kind: Decimal, Int: 1500}}, {"t", Value{Kind: Boolean, Int: 1}},
		}},
		{Value: Value{Kind: String, Str: `x"y\z`}, Params: Params{
			{"d", Value{Kind: Date, Int: -5}}, {"n", Value{Kind: Decimal, Int: -250}},
		}},
		{Value: Value{Kind: DisplayString, Str: "ü"}, Params: Params{{"b", Value{Kind: ByteSequence, Str: "AQ=="}}}},
		{IsInner: true, Inner: []Item{
			{Value: Value{Kind: String, Str: "in"}},
			{Value: Value{Kind: Integer, Int: 2}, Params: Params{{"k", Value{Kind: Boolean, Int: 1}}}},
		}, Params: Params{{"p", Value{Kind: Boolean, Int: 0}}}},
	}
	if !reflect.DeepEqual(list, want) {
		t.Fatalf("ParseList =\n%+v\nwant\n%+v", list, want)
	}
	if v, ok := list[0].Params.Get("q"); !ok || v != (Value{Kind: Integer, Int: 9}) {
		t.Errorf("Get(q) = %+v, %v", v, ok)
	}
	if _, ok := list[0].Params.Get("z"); ok {
		t.Errorf("Get(z) found a parameter that is not there")
	}
}

// FuzzParseList: no panic, and a value that parses has members unless it
// is only spaces.
func FuzzParseList(f *testing.F) {
	for _, s := range []string{`"a";r=0;t=30`, `("a" "b");r=0, %"%c3%bc";x=@1`, `a;q=1.5,`, `:AQ==:`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		list, err := ParseList(s)
		if err == nil && len(list) == 0 {
			for i := 0; i < len(s); i++ {
				if s[i] != ' ' {
					t.Fatalf("ParseList(%q): no members and no error", s)
				}
			}
		}
		if err != nil && list != nil {
			t.Fatalf("ParseList(%q): members with an error", s)
		}
	})
}
