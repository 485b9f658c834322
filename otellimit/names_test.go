package otellimit

import (
	"fmt"
	"sync"
	"testing"
)

func TestBoundedSet(t *testing.T) {
	b := newBoundedSet(3)
	for _, v := range []string{"tok", "ip", "tok", "tenant"} {
		if got := b.value(v); got != v {
			t.Errorf("value(%q) = %q while under the bound", v, got)
		}
	}
	if got := b.value("user"); got != otherValue {
		t.Errorf("a 4th value with max 3: %q, want %q", got, otherValue)
	}
	if got := b.value("ip"); got != "ip" {
		t.Errorf("an admitted value after the bound: %q", got)
	}
	for _, bad := range []string{"", "a:b", "has space", "0123456789abcdef0123456789abcdef0"} {
		if got := newBoundedSet(10).value(bad); got != otherValue {
			t.Errorf("value(%q) = %q, want %q", bad, got, otherValue)
		}
	}
	// Concurrent admissions never exceed the bound.
	b = newBoundedSet(5)
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]bool{}
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				v := b.value(fmt.Sprintf("k%d", (i*20+j)%40))
				mu.Lock()
				seen[v] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	delete(seen, otherValue)
	if len(seen) != 5 {
		t.Errorf("%d distinct values admitted, want 5: %v", len(seen), seen)
	}
}
