package redisbench

import (
	"context"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/hotlimit/hotlimit/redislimit"
)

// BenchmarkGiveBack: the cost of bucket give-backs (Admission.Refund),
// serially over 1024 keys of a bucket that never fills. In "top" an op is
// an AdmitN and its Refund, the latest admission given back (nothing above
// it). In "below" an op is two AdmitN and their Refunds, the lower first
// (a give-back below a later admission: a renewal in redislimit's
// give-back script, ops.lua) and then the upper (a record of the renewed
// incarnation: replayed; before exact give-backs, voided). Reported
// besides ns/op: the server's time in EVALSHA per op (script-µs/op, INFO
// commandstats) and its CPU per op (server-cpu-µs/op, INFO cpu: all it
// did, network included). The server must serve nothing else meanwhile.
func BenchmarkGiveBack(b *testing.B) {
	for _, mode := range []string{"top", "below"} {
		b.Run("redislimit/"+mode, func(b *testing.B) {
			c, n := client(b)
			l, err := redislimit.New(c, "gb", hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1000), Burst: 1000},
				redislimit.WithPrefix(prefix(b)), redislimit.WithTimeout(30*time.Second)) // valgrind: see RESULTS.md
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var lo, hi redislimit.Admission
			admit := func(a *redislimit.Admission, key string) {
				if d, err := l.AdmitN(ctx, a, key, 1); err != nil || !d.Allowed {
					b.Fatal(d, err)
				}
			}
			refund := func(a *redislimit.Admission) {
				if ok, err := a.Refund(ctx); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
			admit(&lo, keys[0]) // loads the scripts
			refund(&lo)
			cpu0, us0, rt0 := redistest.ServerCPU(b, c), scriptMicros(b, c), n.N()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				key := keys[i%nKeys]
				admit(&lo, key)
				if mode == "below" {
					admit(&hi, key)
				}
				refund(&lo)
				if mode == "below" {
					refund(&hi)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(n.N()-rt0)/float64(b.N), "roundtrips/op")
			b.ReportMetric((scriptMicros(b, c)-us0)/float64(b.N), "script-µs/op")
			b.ReportMetric((redistest.ServerCPU(b, c)-cpu0)/float64(b.N), "server-cpu-µs/op")
		})
	}
}
