package admission

import "testing"

// Every outcome has a distinct name; an unknown one says its number. The
// outcomes that reach the handler are those Passed names.
func TestOutcomeString(t *testing.T) {
	seen := map[string]bool{}
	for o := range outcomeCount {
		s := o.String()
		if s == "" || seen[s] {
			t.Errorf("outcome %d: name %q empty or repeated", o, s)
		}
		seen[s] = true
	}
	if s := outcomeCount.String(); s != "outcome(9)" {
		t.Errorf("outcomeCount.String() = %q", s)
	}
	if n := len(GroupCounts{}.Counts); n != int(outcomeCount) {
		t.Errorf("len(GroupCounts{}.Counts) = %d, want the %d outcomes", n, outcomeCount)
	}
	passed := map[Outcome]bool{OutcomeAllowed: true, OutcomeExempt: true, OutcomeErrorAllowed: true, OutcomeDryRunDenied: true}
	for o := range outcomeCount {
		if o.Passed() != passed[o] {
			t.Errorf("%v.Passed() = %v", o, o.Passed())
		}
	}
}
