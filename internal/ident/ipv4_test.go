package ident

import (
	"math/rand/v2"
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

// TestIPv4Random: IPv4 reads what the loop it unrolled (ipv4Digits)
// reads, on random strings of digits, dots and other bytes
// of every length up to 20, and on every string netip writes an address
// as followed by such bytes.
func TestIPv4Random(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789012345....:x"
	check := func(b []byte) {
		a, n, ok := IPv4(b)
		wa, wn, wok := ipv4Digits(b)
		if ok != wok || ok && (a != wa || n != wn) {
			t.Fatalf("%q: %v %d %v, want %v %d %v", b, a, n, ok, wa, wn, wok)
		}
		if sa, sn, sok := IPv4(string(b)); sok != ok || ok && (sa != a || sn != n) {
			t.Fatalf("%q as a string: %v %d %v, as bytes %v %d %v", b, sa, sn, sok, a, n, ok)
		}
	}
	for range 500000 {
		b := make([]byte, rng.IntN(21))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		check(b)
		var x [4]byte
		for i := range x {
			x[i] = byte(rng.IntN(256))
		}
		b = netip.AddrFrom4(x).AppendTo(nil)
		for range rng.IntN(4) {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		check(b)
	}
}

// ipv4Digits is the parser IPv4 replaced, a part at a time, digit by
// digit: the oracle of TestIPv4Random.
func ipv4Digits(s []byte) (a [4]byte, n int, ok bool) {
	for part := range 4 {
		if part > 0 {
			if n >= len(s) || s[n] != '.' {
				return a, 0, false
			}
			n++
		}
		if n >= len(s) {
			return a, 0, false
		}
		v := uint(s[n]) - '0'
		if v > 9 {
			return a, 0, false
		}
		n++
		if v != 0 {
			for end := n + 2; n < end && n < len(s); n++ {
				d := uint(s[n]) - '0'
				if d > 9 {
					break
				}
				v = v*10 + d
			}
			if v > 255 {
				return a, 0, false
			}
		}
		a[part] = byte(v)
	}
	return a, n, true
}
