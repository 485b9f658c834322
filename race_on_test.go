//go:build race

package hotlimit_test

// raceEnabled reports whether the tests run under the race detector, which
// slows the longest statistical runs tenfold: they run a tenth as long.
const raceEnabled = true
