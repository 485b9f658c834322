package lab

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hotlimit/hotlimit"
)

// MaxTraceRequests bounds how many requests ReadTrace accepts, so a huge
// file fails clearly instead of exhausting memory.
const MaxTraceRequests = 5_000_000

// MaxReported bounds the bad lines a TraceError lists; it still counts
// them all.
const MaxReported = 20

// TraceError is a trace's bad lines: every one of them up to MaxReported,
// each as "name:line: reason", and how many there are in all.
type TraceError struct {
	Name  string
	Lines []string
	Bad   int
}

// add records one bad line.
func (e *TraceError) add(line int, format string, args ...any) {
	e.Bad++
	if len(e.Lines) < MaxReported {
		e.Lines = append(e.Lines, fmt.Sprintf("%s:%d: %s", e.Name, line, fmt.Sprintf(format, args...)))
	}
}

// Error returns the reported lines, one per line of text, and a last one
// counting those left out.
func (e *TraceError) Error() string {
	s := strings.Join(e.Lines, "\n")
	if e.Bad > len(e.Lines) {
		s += fmt.Sprintf("\n%s: %d bad lines in all; the first %d are above", e.Name, e.Bad, len(e.Lines))
	}
	return s
}

// ReadTrace reads a CSV trace of requests, one per line:
//
//	timestamp,key[,cost]
//
// timestamp is either seconds from the start of the trace, with an
// optional fraction of up to 9 digits ("0", "12.5", "3600.000001"), or an
// RFC 3339 time ("2026-11-29T23:00:00.25Z"); one file uses one form. RFC
// 3339 times are taken relative to the earliest one. key is any non-empty
// text of at most hotlimit.MaxKeyLen bytes (quote it, CSV style, if it holds
// a comma). cost is a whole number ≥ 0 and defaults to 1. A first line
// whose timestamp field reads "timestamp", "time" or "ts" is a header;
// blank lines and lines starting with '#' are skipped. Lines need not be
// in time order: requests are sorted by time, stably.
//
// name is used in error messages, which have the form "name:line: reason".
// Every bad line is reported, up to MaxReported, in a *TraceError; a file
// that cannot be read as a whole (UTF-16 text, more than MaxTraceRequests
// requests, an I/O error) fails with a plain error.
func ReadTrace(r io.Reader, name string) ([]Request, error) {
	cr, err := csvReader(r, name)
	if err != nil {
		return nil, err
	}
	t := &traceReader{name: name, bads: &TraceError{Name: name}}
	first := true
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			// A syntax error spoils its own record only: the reader goes
			// on at the next line (after an unclosed quote, that is the
			// end of the file).
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			t.bads.add(pe.Line, "%v", pe.Err)
			first = false
			continue
		}
		// Only after a successful Read: FieldPos panics when the record
		// it would describe has no fields, as after a syntax error.
		line, _ := cr.FieldPos(0)
		if first {
			first = false
			if isHeader(rec[0]) {
				continue
			}
		}
		if err := t.add(rec, line); err != nil {
			return nil, err
		}
	}
	t.fromEarliest()
	if t.bads.Bad > 0 {
		return nil, t.bads
	}
	if len(t.reqs) == 0 {
		return nil, fmt.Errorf("%s: no requests", name)
	}
	slices.SortStableFunc(t.reqs, func(a, b Request) int { return compareDur(a.At, b.At) })
	return t.reqs, nil
}

// csvReader returns a reader of the CSV records of r, a trace named name,
// past a UTF-8 byte-order mark; it refuses UTF-16 text.
func csvReader(r io.Reader, name string) (*csv.Reader, error) {
	br := bufio.NewReader(r)
	switch bom, _ := br.Peek(3); {
	case bytes.HasPrefix(bom, []byte("\xEF\xBB\xBF")):
		br.Discard(3) // UTF-8 byte-order mark, as spreadsheets write
	case bytes.HasPrefix(bom, []byte("\xFF\xFE")), bytes.HasPrefix(bom, []byte("\xFE\xFF")):
		return nil, fmt.Errorf("%s: the file is UTF-16 text: save it as CSV in UTF-8", name)
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	return cr, nil
}

// isHeader reports whether field, the first of a trace's first line,
// names the timestamp column.
func isHeader(field string) bool {
	switch strings.ToLower(strings.TrimSpace(field)) {
	case "timestamp", "time", "ts":
		return true
	}
	return false
}

// traceReader is a trace as ReadTrace reads it.
type traceReader struct {
	name   string
	reqs   []Request
	stamps []time.Time // RFC 3339 form, parallel to reqs
	lines  []int       // each request's line, parallel to reqs
	form   int         // 0 unknown, 1 seconds, 2 RFC 3339: the first good line's
	bads   *TraceError
}

// add reads rec, the record at line, as a request, or notes it as a bad
// line. It fails past MaxTraceRequests requests.
func (t *traceReader) add(rec []string, line int) error {
	req, err := keyAndCost(rec)
	if err == nil {
		err = t.timestamp(&req, strings.TrimSpace(rec[0]))
	}
	if err != nil {
		t.bads.add(line, "%v", err)
		return nil
	}
	if len(t.reqs) >= MaxTraceRequests {
		return fmt.Errorf("%s:%d: more than %d requests", t.name, line, MaxTraceRequests)
	}
	t.reqs = append(t.reqs, req)
	t.lines = append(t.lines, line)
	return nil
}

// keyAndCost returns the request of record rec without its time: its key
// and its cost (1 when the record has none).
func keyAndCost(rec []string) (Request, error) {
	if len(rec) < 2 || len(rec) > 3 {
		return Request{}, fmt.Errorf("want timestamp,key[,cost], got %d fields", len(rec))
	}
	req := Request{Key: strings.TrimSpace(rec[1]), Cost: 1}
	if req.Key == "" {
		return req, errors.New("empty key")
	}
	if len(req.Key) > hotlimit.MaxKeyLen {
		return req, fmt.Errorf("key is %d bytes, longer than %d", len(req.Key), hotlimit.MaxKeyLen)
	}
	if len(rec) == 3 {
		c, err := strconv.ParseInt(strings.TrimSpace(rec[2]), 10, 64)
		if err != nil || c < 0 {
			return req, fmt.Errorf("cost %q: want a whole number ≥ 0", rec[2])
		}
		req.Cost = c
	}
	return req, nil
}

// timestamp reads ts, a request's timestamp, in the file's form: into
// req.At for seconds, into t.stamps for an RFC 3339 time (fromEarliest
// sets req.At once every time is read). The first good line sets the
// form.
func (t *traceReader) timestamp(req *Request, ts string) error {
	f := 1
	if strings.ContainsAny(ts, "T:") {
		f = 2
	}
	if t.form != 0 && f != t.form {
		return fmt.Errorf("timestamp %q mixes RFC 3339 times and seconds in one file", ts)
	}
	if f == 1 {
		d, err := parseSeconds(ts)
		if err != nil {
			return fmt.Errorf("timestamp %q: %v", ts, err)
		}
		req.At = d
	} else {
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return fmt.Errorf("timestamp %q: want RFC 3339, such as 2026-11-29T23:00:00.25Z", ts)
		}
		t.stamps = append(t.stamps, at)
	}
	t.form = f
	return nil
}

// fromEarliest sets each request's time, in a file of RFC 3339 times, to
// its time after the earliest, and notes as bad the lines more than
// maxTraceSeconds after it.
func (t *traceReader) fromEarliest() {
	if t.form != 2 || len(t.stamps) == 0 {
		return
	}
	t0 := slices.MinFunc(t.stamps, func(a, b time.Time) int { return a.Compare(b) })
	for i, at := range t.stamps {
		d := at.Sub(t0) // saturates at 292 years
		if d > maxTraceSeconds*time.Second {
			t.bads.add(t.lines[i], "%s is more than %d seconds after the earliest time, %s", at.Format(time.RFC3339Nano), int64(maxTraceSeconds), t0.Format(time.RFC3339Nano))
		}
		t.reqs[i].At = d
	}
}

// maxTraceSeconds (100 years) bounds the span of a trace, in either form:
// it keeps instants, plus the leaky bucket's delays, within the manual
// clock's range (146 years) and far from time.Duration's limits.
const maxTraceSeconds = 100 * 365 * 24 * 3600

// parseSeconds parses a non-negative decimal number of seconds with up to
// nine fractional digits, exactly.
func parseSeconds(s string) (time.Duration, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" && (!dot || frac == "") {
		return 0, errors.New("want seconds, such as 12 or 12.5")
	}
	if strings.HasPrefix(whole, "-") {
		return 0, errors.New("negative time")
	}
	var sec int64
	if whole != "" {
		if !digits(whole) {
			return 0, errors.New("want seconds, such as 12 or 12.5, or an RFC 3339 time")
		}
		v, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || v > maxTraceSeconds {
			return 0, fmt.Errorf("more than %d seconds", int64(maxTraceSeconds))
		}
		sec = v
	}
	var ns int64
	if dot {
		if !digits(frac) {
			return 0, errors.New("want seconds, such as 12 or 12.5, or an RFC 3339 time")
		}
		if len(frac) > 9 {
			return 0, errors.New("want at most 9 digits after the point")
		}
		v, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		ns = v
	}
	return time.Duration(sec)*time.Second + time.Duration(ns), nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// TraceShape returns a Shape that replays reqs (sorted by At), named name.
func TraceShape(name string, reqs []Request) Shape {
	var end time.Duration
	if len(reqs) > 0 {
		end = reqs[len(reqs)-1].At + 1
	}
	return Shape{
		Name:     "trace",
		About:    fmt.Sprintf("replay of %s", name),
		Duration: end,
		New:      func() Traffic { return listOf(slices.Clone(reqs)) },
	}
}
