package expvarlimit_test

import (
	"encoding/json"
	"expvar"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/expvarlimit"
)

// runs numbers the published names, so that the test passes with -count
// above 1 (expvar names live as long as the process).
var runs atomic.Int64

func TestPublish(t *testing.T) {
	name := fmt.Sprintf("hotlimit_test_%d", runs.Add(1))
	l, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 2}, hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := expvarlimit.Publish(name, l); err != nil {
		t.Fatal(err)
	}
	var a hotlimit.Admission
	l.AdmitN(&a, "k", 1)
	for range 2 {
		l.Allow("k")
	}
	a.Refund()
	var st hotlimit.Stats
	if err := json.Unmarshal([]byte(expvar.Get(name).String()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Allowed != 2 || st.Denied != 1 || st.Keys != 1 || st.Refunded != 1 {
		t.Fatalf("published %+v, want 2 allowed, 1 denied, 1 key, 1 refunded", st)
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(expvar.Get(name).String()), &fields); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"Allowed", "Denied", "Keys", "Swept", "Evicted", "Refunded", "Bytes"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("published %v: no field %s", fields, f)
		}
	}
	if b, want := fields["Bytes"], float64(l.MemStats().Total); b != want || want == 0 {
		t.Errorf("published Bytes %v, want MemStats().Total %v", b, want)
	}
	if err := expvarlimit.Publish(name, l); err == nil {
		t.Fatal("publishing a name twice succeeded")
	}
	if err := expvarlimit.Publish("x", nil); err == nil {
		t.Fatal("nil limiter accepted")
	}
}
