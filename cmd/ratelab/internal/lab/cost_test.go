package lab

import (
	"testing"
	"time"
)

func TestMeasureCost(t *testing.T) {
	p := Policy{Limit: 20, Window: time.Second, LeakyCapacity: 1}
	for _, a := range Algorithms(p) {
		c, err := MeasureCost(a, p, 2000, 1000)
		if err != nil {
			t.Fatal(err)
		}
		// Every algorithm keeps some state per key; this is not a timing
		// assertion, only that the measurement ran and saw the keys.
		if c.BytesPerKey <= 0 || c.NsPerDecision <= 0 || c.Fill != 20 || c.Keys != 2000 {
			t.Errorf("%s: %+v", a.Name, c)
		}
	}
	na := Algorithm{Name: SlidingLog, NA: "n/a (limit too large)"}
	if c, err := MeasureCost(na, p, 10, 10); err != nil || c.NA != na.NA || c.BytesPerKey != 0 {
		t.Errorf("n/a algorithm: %+v, %v", c, err)
	}
}
