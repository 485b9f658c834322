package admission

import "testing"

// Every outcome has a distinct name; an unknown one says its number. The
// outcomes that reach the handler are those Passed names.
func TestOutcomeString(t *testing.T) {
	seen := map[string]bool{}
	for o := range OutcomeCount {
		s := o.String()
		if s == "" || seen[s] {
			t.Errorf("outcome %d: name %q empty or repeated", o, s)
		}
		seen[s] = true
	}
	if s := OutcomeCount.String(); s != "outcome(9)" {
		t.Errorf("OutcomeCount.String() = %q", s)
	}
	passed := map[Outcome]bool{OutcomeAllowed: true, OutcomeExempt: true, OutcomeErrorAllowed: true, OutcomeDryRunDenied: true}
	for o := range OutcomeCount {
		if o.Passed() != passed[o] {
			t.Errorf("%v.Passed() = %v", o, o.Passed())
		}
	}
}
