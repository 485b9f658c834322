package redistest

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePort: the port and its bus port are free and below the
// ephemeral range.
func TestFreePort(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		p := FreePort(t)
		if p < 1024 || p+10000 >= low {
			t.Fatalf("FreePort = %d: want 1024 ≤ p and p+10000 < %d", p, low)
		}
		for _, q := range []int{p, p + 10000} {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				t.Fatalf("FreePort = %d: port %d is not free: %v", p, q, err)
			}
			ln.Close()
		}
	}
}

// TestPrefixUnique: two calls never return the same prefix, and a
// prefix holds no brace (redislimit.WithPrefix refuses one).
func TestPrefixUnique(t *testing.T) {
	t.Run("a{b}", func(t *testing.T) {
		seen := map[string]bool{}
		for range 100 {
			p := Prefix(t)
			if seen[p] {
				t.Fatalf("Prefix returned %q twice", p)
			}
			seen[p] = true
			for _, r := range p {
				if r == '{' || r == '}' {
					t.Fatalf("Prefix %q holds a brace", p)
				}
			}
		}
	})
}
