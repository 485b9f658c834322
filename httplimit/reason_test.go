package httplimit

import (
	"bytes"
	"encoding/json"
	"github.com/hotlimit/hotlimit/admission"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestEventReason: Event.Reason names every refusal as Denial.Reason
// does, a dry run's refusal as the one it stood for (a bad cost is not a
// missing key), and the DenialLogger logs refusals for a bad cost and for
// a cost above the capacity with those reasons.
func TestEventReason(t *testing.T) {
	for _, dry := range []bool{false, true} {
		buf := new(bytes.Buffer)
		dl, err := NewDenialLogger(slog.New(slog.NewJSONHandler(buf, nil)), DenialLogOptions{Rate: hotlimit.PerSecond(1000), Burst: 100})
		if err != nil {
			t.Fatal(err)
		}
		var evs []admission.Event
		hs := newHarness(t, Config{
			Limits: map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Hour}},
			Groups: []Group{
				{Name: "one", Patterns: []string{"/one"}, Limit: "l"},
				{Name: "big", Patterns: []string{"/big"}, Limit: "l", CostFunc: fixedCost(2)},
				{Name: "priced", Patterns: []string{"/priced"}, Limit: "l", CostFunc: CostFromContext(-1)},
			},
			DefaultGroup: "one",
			Key:          TokenKey("Authorization"),
			DryRun:       dry,
			Hook:         func(e admission.Event) { evs = append(evs, e); dl.Hook(e) },
		})
		hs.do("/one", token)
		hs.do("/one", token)
		hs.do("/big", token)
		hs.do("/priced", token)
		hs.do("/one", "")
		want := []string{"", "rate_limit_exceeded", "rate_limit_cost_exceeds_limit", "rate_limit_cost_invalid", "rate_limit_key_missing"}
		var logged []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatal(err)
			}
			logged = append(logged, m["reason"].(string))
		}
		for i, e := range evs {
			if got := Reason(&e); got != want[i] {
				t.Errorf("dry run %v, request %d (%v): Reason %q, want %q", dry, i, e.Outcome, got, want[i])
			}
		}
		if strings.Join(logged, " ") != strings.Join(want[1:], " ") {
			t.Errorf("dry run %v: logged reasons %q, want %q", dry, logged, want[1:])
		}
		if !dry {
			w := hs.do("/priced", token)
			if w.Code != http.StatusBadRequest {
				t.Errorf("priced without a price: %d", w.Code)
			}
		}
	}
}
