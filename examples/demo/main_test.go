package main

import (
	"testing"
	"time"
)

func TestMostInWindow(t *testing.T) {
	ms := time.Millisecond
	ts := []time.Duration{0, 100 * ms, 999 * ms, 1000 * ms, 1500 * ms, 1999 * ms}
	// [999ms, 1999ms) holds 999, 1000, 1500: the window is half-open.
	if got := mostInWindow(ts, time.Second); got != 3 {
		t.Fatalf("mostInWindow = %d, want 3", got)
	}
	if got := mostInWindow(nil, time.Second); got != 0 {
		t.Fatalf("mostInWindow(nil) = %d", got)
	}
}
