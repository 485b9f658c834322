package ident

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// TestIPv4Parts: IPv4 accepts an address whole exactly when netip parses
// it and writes it back the same, and gives netip's address: every part
// of one to four digits (leading zeros, 255, 256, 999 included) in each
// of the four places; then the same text followed by a port, a dot, a
// letter, or a digit after a last part of three digits or "0", all of
// which IPv4 leaves unread.
func TestIPv4Parts(t *testing.T) {
	var parts []string
	for width := 1; width <= 4; width++ {
		for v := range 10000 {
			if s := strconv.Itoa(v); len(s) <= width {
				parts = append(parts, strings.Repeat("0", width-len(s))+s)
			}
		}
	}
	for _, p := range parts {
		for place := range 4 {
			f := []string{"1", "22", "0", "255"}
			f[place] = p
			s := strings.Join(f, ".")
			addr, err := netip.ParseAddr(s)
			want := err == nil && addr.String() == s
			a, n, ok := IPv4(s)
			if got := ok && n == len(s); got != want || got && a != addr.As4() {
				t.Fatalf("%q: %v %d %v; netip %v %v", s, a, n, ok, addr, err)
			}
			if want {
				tails := []string{":80", ".", "x"}
				if last := f[3]; len(last) == 3 || last == "0" {
					tails = append(tails, "5") // a fourth digit, or one after "0", is left unread
				}
				for _, tail := range tails {
					if a2, n2, ok2 := IPv4([]byte(s + tail)); !ok2 || n2 != len(s) || a2 != a {
						t.Fatalf("%q: %v %d %v, want %v %d", s+tail, a2, n2, ok2, a, len(s))
					}
				}
			}
		}
	}
}

var sinkIPv4 [4]byte

// BenchmarkIPv4 parses the address of an IPv4 peer, as text and as bytes.
func BenchmarkIPv4(b *testing.B) {
	s := "203.0.113.255:41234"
	bs := []byte("203.0.113.255")
	b.Run("string", func(b *testing.B) {
		for b.Loop() {
			a, _, _ := IPv4(s)
			sinkIPv4 = a
		}
	})
	b.Run("bytes", func(b *testing.B) {
		for b.Loop() {
			a, _, _ := IPv4(bs)
			sinkIPv4 = a
		}
	})
}
