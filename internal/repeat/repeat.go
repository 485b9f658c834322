// Package repeat finds the layers of a layered decision that name the
// same limiter and key, for hotlimit's AllowLayers and redislimit's, whose
// Layer types differ: such layers are one limit, decided once for the sum
// of their costs.
package repeat

// First returns the index of the first of layers 0 to i on layer i's
// limiter and key (i itself when none comes before it). of(j) returns
// layer j's limiter and key; a zero (nil) limiter is never repeated. of
// is a closure over the caller's layers: it does not escape, and neither
// do they.
func First[P comparable](i int, of func(j int) (P, string)) int {
	var none P
	li, ki := of(i)
	if li == none {
		return i
	}
	for j := range i {
		if lj, kj := of(j); lj == li && kj == ki {
			return j
		}
	}
	return i
}

// Any reports whether one of n layers names the limiter and key of one
// before it (of as for First).
func Any[P comparable](n int, of func(j int) (P, string)) bool {
	for i := 1; i < n; i++ {
		if First(i, of) < i {
			return true
		}
	}
	return false
}
