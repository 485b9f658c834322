//go:build !race

package otellimit

// raceEnabled reports whether the tests run under the race detector, which
// drops sync.Pool items at random: allocation counts mean nothing then.
const raceEnabled = false
