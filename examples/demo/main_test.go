package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestEveryAlgorithm: the demo runs each of the package's policy types
// once, and its documentation says how many that is.
func TestEveryAlgorithm(t *testing.T) {
	want := []string{"hotlimit.TokenBucket", "hotlimit.LeakyBucket", "hotlimit.FixedWindow", "hotlimit.SlidingWindow", "hotlimit.SlidingLog"}
	var got []string
	for _, a := range algos {
		got = append(got, fmt.Sprintf("%T", a.policy))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the demo runs %v, want one of each algorithm: %v", got, want)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	count := [...]string{"no", "one", "two", "three", "four", "five", "six", "seven"}[len(algos)]
	if !strings.Contains(string(src), "each of hotlimit's "+count+"\n// algorithms") || !strings.Contains(string(src), "All "+count+" enforce") {
		t.Errorf("main.go does not say the demo runs %s algorithms", count)
	}
}

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
