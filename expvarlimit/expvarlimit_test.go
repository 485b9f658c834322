package expvarlimit_test

import (
	"encoding/json"
	"expvar"
	"testing"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/expvarlimit"
)

func TestPublish(t *testing.T) {
	l, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 2}, hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := expvarlimit.Publish("hotlimit_test", l); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		l.Allow("k")
	}
	l.Refund("k", 1)
	var st hotlimit.Stats
	if err := json.Unmarshal([]byte(expvar.Get("hotlimit_test").String()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Allowed != 2 || st.Denied != 1 || st.Keys != 1 || st.Refunded != 1 {
		t.Fatalf("published %+v, want 2 allowed, 1 denied, 1 key, 1 refunded", st)
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(expvar.Get("hotlimit_test").String()), &fields); err != nil {
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
	if err := expvarlimit.Publish("hotlimit_test", l); err == nil {
		t.Fatal("publishing a name twice succeeded")
	}
	if err := expvarlimit.Publish("x", nil); err == nil {
		t.Fatal("nil limiter accepted")
	}
}
