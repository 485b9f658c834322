package ident

// IPv4 reads the IPv4 address at the start of s written as netip writes
// one: four decimal parts, each 0 to 255 without a leading zero, joined
// by dots. It returns the address and the length of its text, or ok false
// when s does not start with one. It reads at most three digits a part:
// what follows the address (a digit included) is the caller's to check.
// httplimit's fast path reads a peer address with it and admission
// parses an "ip:" identity back with it, so that both accept one form.
func IPv4[S ~string | ~[]byte](s S) (a [4]byte, n int, ok bool) {
	for part := range 4 {
		if part > 0 {
			if n >= len(s) || s[n] != '.' {
				return a, 0, false
			}
			n++
		}
		// A part's up to three digits, unrolled: a loop over them took
		// about 16 instructions a byte (callgrind).
		if n >= len(s) {
			return a, 0, false
		}
		v := uint(s[n]) - '0'
		if v > 9 {
			return a, 0, false
		}
		n++
		if v != 0 && n < len(s) { // "0" is a whole part: a digit after it is refused by the next check
			if d := uint(s[n]) - '0'; d <= 9 {
				v = v*10 + d
				n++
				if n < len(s) {
					if d := uint(s[n]) - '0'; d <= 9 {
						v = v*10 + d
						n++
					}
				}
			}
		}
		if v > 255 {
			return a, 0, false
		}
		a[part] = byte(v)
	}
	return a, n, true
}
