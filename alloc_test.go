package hotlimit_test

import (
	"testing"

	"github.com/hotlimit/hotlimit"
)

func TestAllowAllocatesNothing(t *testing.T) {
	for _, p := range testPolicies() {
		l, err := hotlimit.New(p, hotlimit.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		short, long := "user:123456", "tenant:acme:route:/v1/export:token:0123456789abcdef"
		// string(b) converts without allocating up to 32 bytes; longer
		// byte keys go through AllowNBytes.
		b, bl := []byte("ip:2001:db8::1:route:/login"), []byte(long)
		l.Allow(string(b))
		l.Allow(short)
		l.Allow(long)
		if n := testing.AllocsPerRun(1000, func() {
			l.Allow(short)
			l.AllowN(long, 1)
			l.AllowN(string(b), 0)
			l.Allow(string(b))
			l.AllowN(short, -1)
			l.AllowNBytes(bl, 1)
			l.AllowBytes(bl)
		}); n != 0 {
			t.Errorf("%T: %v allocations per run, want 0", p, n)
		}
		l.Close()
	}
}
