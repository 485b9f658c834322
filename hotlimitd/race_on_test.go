//go:build race

package hotlimitd_test

const raceEnabled = true
