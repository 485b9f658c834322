package lab

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestReadTrace(t *testing.T) {
	in := `timestamp,key,cost
# a comment
0,alice,1
1.5,bob
  0.25 , "carol, inc", 3

2.000000001,alice,0
`
	got, err := ReadTrace(strings.NewReader(in), "t.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{At: 0, Key: "alice", Cost: 1},
		{At: 250 * time.Millisecond, Key: "carol, inc", Cost: 3},
		{At: 1500 * time.Millisecond, Key: "bob", Cost: 1},
		{At: 2*time.Second + 1, Key: "alice", Cost: 0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d requests %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestReadTraceRFC3339(t *testing.T) {
	in := "2026-11-29T23:00:01.5Z,a\n2026-11-29T23:00:00Z,b,2\n2026-11-30T00:00:00+01:00,c\n"
	got, err := ReadTrace(strings.NewReader(in), "t.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{{0, "b", 2}, {0, "c", 1}, {1500 * time.Millisecond, "a", 1}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestReadTraceErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "t.csv: no requests"},
		{"ts,key\n", "t.csv: no requests"},
		{"0,a\n1\n", "t.csv:2: want timestamp,key[,cost], got 1 fields"},
		{"0,a\n1,b,2,3\n", "t.csv:2: want timestamp,key[,cost], got 4 fields"},
		{"0,a\n\n# c\n1, \n", "t.csv:4: empty key"},
		{"0,a,-1\n", `t.csv:1: cost "-1": want a whole number ≥ 0`},
		{"0,a,x\n", `t.csv:1: cost "x": want a whole number ≥ 0`},
		{"-1,a\n", `t.csv:1: timestamp "-1": negative time`},
		{"abc,a\n", `t.csv:1: timestamp "abc": want seconds`},
		{"1.2.3,a\n", `t.csv:1: timestamp "1.2.3": want seconds`},
		{"1.0000000001,a\n", `t.csv:1: timestamp "1.0000000001": want at most 9 digits`},
		{"99999999999999,a\n", `t.csv:1: timestamp "99999999999999": more than`},
		{"0,a\n2026-11-29T23:00:00Z,b\n", "t.csv:2: timestamp \"2026-11-29T23:00:00Z\" mixes"},
		{"2026-13-29T23:00:00Z,b\n", "t.csv:1: timestamp \"2026-13-29T23:00:00Z\": want RFC 3339"},
		{"0,\"a\n", "t.csv:1: extraneous or missing \" in quoted-field"},
		// A CSV syntax error on a later line, in its first field: reported
		// with its line, never a panic (FieldPos has no field to report then).
		{"0,a\n\"x,b\n", "t.csv:2: extraneous or missing \" in quoted-field"},
		{"0,a\n1,b\n\"x\"y,c\n", "t.csv:3: extraneous or missing \" in quoted-field"},
		{"5.,a\n", `t.csv:1: timestamp "5.": want seconds`},
		{"timestamp,key\nts,key\n", `t.csv:2: timestamp "ts": want seconds`},
		{"0," + strings.Repeat("k", 64<<10+1) + "\n", "t.csv:1: key is 65537 bytes"},
		// Spans beyond 100 years, in either form: the manual clock ends at
		// 146, and time.Duration wraps at 292.
		{"3155760001,a\n", `t.csv:1: timestamp "3155760001": more than 3153600000 seconds`},
		{"1900-01-01T00:00:00Z,a\n2026-01-01T00:00:00Z,b\n", "t.csv:2: 2026-01-01T00:00:00Z is more than 3153600000 seconds after the earliest time, 1900-01-01T00:00:00Z"},
		{"1700-01-01T00:00:00Z,a\n2026-01-01T00:00:00Z,b\n", "t.csv:2: 2026-01-01T00:00:00Z is more than"},
		{"\xFF\xFEt\x00s\x00", "t.csv: the file is UTF-16 text: save it as CSV in UTF-8"},
		{"\xEF\xBB\xBF", "t.csv: no requests"},
	}
	for _, tt := range tests {
		_, err := ReadTrace(strings.NewReader(tt.in), "t.csv")
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("ReadTrace(%.40q) = %v, want an error starting %q", tt.in, err, tt.want)
		}
	}
}

func TestTraceShape(t *testing.T) {
	reqs := []Request{{0, "a", 1}, {time.Second, "b", 2}}
	s := TraceShape("x.csv", reqs)
	if s.Duration != time.Second+1 || s.Reactive || !strings.Contains(s.About, "x.csv") {
		t.Errorf("TraceShape = %+v", s)
	}
	got := drain(s.New())
	if len(got) != 2 || got[1] != reqs[1] {
		t.Errorf("replay = %+v", got)
	}
}

// Spreadsheets (Excel's "CSV UTF-8") start the file with a UTF-8
// byte-order mark: it is not part of the header or the first timestamp.
func TestReadTraceByteOrderMark(t *testing.T) {
	for _, in := range []string{"\xEF\xBB\xBFtimestamp,key,cost\n0.5,a,2\n", "\xEF\xBB\xBF0.5,a,2\n"} {
		got, err := ReadTrace(strings.NewReader(in), "t.csv")
		if err != nil || len(got) != 1 || got[0] != (Request{At: 500 * time.Millisecond, Key: "a", Cost: 2}) {
			t.Errorf("ReadTrace(%q) = %+v, %v", in, got, err)
		}
	}
	// Only at the start: elsewhere it is part of a field.
	if _, err := ReadTrace(strings.NewReader("0,a\n\xEF\xBB\xBF1,b\n"), "t.csv"); err == nil {
		t.Error("a byte-order mark inside the file was accepted")
	}
}

// Every bad line is reported, not only the first, up to MaxReported, and
// the rest are counted; the good lines around them change nothing.
func TestReadTraceReportsEveryBadLine(t *testing.T) {
	in := "timestamp,key,cost\n0,a\n1,\n2,b,two\n\"x\"y,c\n3,d\n-4,e\n5,f,1,1\n"
	_, err := ReadTrace(strings.NewReader(in), "t.csv")
	want := []string{
		"t.csv:3: empty key",
		`t.csv:4: cost "two": want a whole number ≥ 0`,
		`t.csv:5: extraneous or missing " in quoted-field`,
		`t.csv:7: timestamp "-4": negative time`,
		"t.csv:8: want timestamp,key[,cost], got 4 fields",
	}
	var te *TraceError
	if !errors.As(err, &te) || te.Bad != len(want) || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("ReadTrace = %v, want every bad line:\n%s", err, strings.Join(want, "\n"))
	}
	// Past the cap: the first MaxReported, then how many in all.
	var b strings.Builder
	for i := range MaxReported + 7 {
		fmt.Fprintf(&b, "%d,k,x\n", i)
	}
	_, err = ReadTrace(strings.NewReader(b.String()), "t.csv")
	lines := strings.Split(fmt.Sprint(err), "\n")
	if !errors.As(err, &te) || te.Bad != MaxReported+7 || len(lines) != MaxReported+1 ||
		lines[MaxReported-1] != fmt.Sprintf(`t.csv:%d: cost "x": want a whole number ≥ 0`, MaxReported) ||
		lines[MaxReported] != fmt.Sprintf("t.csv: %d bad lines in all; the first %d are above", MaxReported+7, MaxReported) {
		t.Errorf("%d bad lines: %d lines reported:\n%v", MaxReported+7, len(lines), err)
	}
	// A form mismatch is judged against the first good line: a bad first
	// timestamp does not decide the file's form.
	if _, err := ReadTrace(strings.NewReader("abc,a\n2026-11-29T23:00:00Z,b\n2026-11-29T23:00:01Z,b\n"), "t.csv"); err == nil || err.Error() != `t.csv:1: timestamp "abc": want seconds, such as 12 or 12.5, or an RFC 3339 time` {
		t.Errorf("bad first line then RFC 3339: %v", err)
	}
}
