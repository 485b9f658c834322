package grpclimit_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
)

// TestConcurrentTokensExact: goroutines sharing one Interceptor (one
// Pipeline, whose pooled Results hand a Local views of their keys) make
// calls of many tokens of one length, each key past the 15-byte inline
// slot, through a group and a global layer, at a frozen instant: each
// token is admitted exactly its group limit's calls, none counted under
// another token's key.
func TestConcurrentTokensExact(t *testing.T) {
	clock := hotlimit.NewManualClock()
	clock.Set(500 * time.Second)
	ic := newIC(t, clock, grpclimit.Config{
		Limits: map[string]hotlimit.Policy{
			"check": hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
			"glob":  hotlimit.SlidingLog{Limit: 1000, Window: time.Minute},
		},
		Groups:       []grpclimit.Group{{Name: "check", Methods: []string{mCheck}, Limit: "check"}},
		DefaultGroup: "check",
		Key:          grpclimit.MetadataKey("authorization"),
		Global:       "glob",
	})
	c := serveIC(t, ic)
	ctx := testCtx(t)
	var tokens []string
	for i := range 10 {
		tokens = append(tokens, fmt.Sprintf("%02d%s%02d", i, strings.Repeat("y", 30), i))
	}
	const goroutines, rounds = 8, 3
	var mu sync.Mutex
	admitted := map[string]int{}
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range rounds * len(tokens) {
				tok := tokens[(n+w)%len(tokens)]
				_, err := call(bearer(ctx, tok), c)
				mu.Lock()
				if err == nil {
					admitted[tok]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, tok := range tokens {
		if admitted[tok] != 5 {
			t.Errorf("token %s: %d calls admitted, want 5", tok, admitted[tok])
		}
	}
}
