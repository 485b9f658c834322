//go:build race

package hotlimitd

const raceOn = true
