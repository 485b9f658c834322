package wire

import (
	"strconv"
	"testing"
)

// TestAppendDec: appendDec writes what strconv.AppendUint writes, after
// what b holds, at every number of digits and around each power of ten,
// whether b has room or must grow.
func TestAppendDec(t *testing.T) {
	vals := []uint64{0, 1<<64 - 1, 1<<63 - 1, MaxSFInt}
	for p := uint64(1); ; p *= 10 {
		vals = append(vals, p-1, p, p+1, p*2, p*9+p-1)
		if p > (1<<64-1)/10 {
			break
		}
	}
	for u := range uint64(1000) {
		vals = append(vals, u*7919%100_000)
	}
	var room [64]byte
	for _, u := range vals {
		want := strconv.AppendUint([]byte("x;"), u, 10)
		for _, b := range [][]byte{append(room[:0], "x;"...), []byte("x;")} {
			if got := appendDec(b, u); string(got) != string(want) {
				t.Fatalf("appendDec(%d) = %q, want %q", u, got, want)
			}
		}
	}
}
