package hotlimitd_test

import (
	"math"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit/hotlimitd"
)

// replacedUnlimitedYAML: an unlimited rule that another rule replaces.
const replacedUnlimitedYAML = `domain: ru
descriptors:
  - key: a
    rate_limit:
      name: rule_a
      unlimited: true
  - key: b
    rate_limit:
      unit: minute
      requests_per_unit: 5
      replaces:
        - name: rule_a
`

// TestReplacedUnlimitedStaysUnlimited: a descriptor that matches an
// unlimited rule stays unlimited when another descriptor of the request
// replaces that rule, as envoyproxy/ratelimit has it (its
// constructLimitsToCheck sets an unlimited descriptor aside before it
// applies replaces): OK with limit_remaining 4294967295, while the
// replacing descriptor is decided as usual.
func TestReplacedUnlimitedStaysUnlimited(t *testing.T) {
	f := newFixture(t, replacedUnlimitedYAML, hotlimitd.Options{})
	resp := ask(t, f.srv, request("ru", desc("a", "1"), desc("b", "1")))
	if resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("overall %v, want OK", resp.OverallCode)
	}
	if st := resp.Statuses[0]; st.Code != rlsv3.RateLimitResponse_OK || st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil {
		t.Errorf("replaced unlimited descriptor: %v; want OK, limit_remaining %d, no current_limit", st, uint32(math.MaxUint32))
	}
	if st := resp.Statuses[1]; st.CurrentLimit.GetRequestsPerUnit() != 5 || st.LimitRemaining != 4 {
		t.Errorf("replacing descriptor: %v; want current_limit 5 a minute, limit_remaining 4", st)
	}
}
