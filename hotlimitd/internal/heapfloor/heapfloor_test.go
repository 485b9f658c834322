package heapfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// sink keeps the garbage the tests allocate from being optimized away.
var sink []byte

// collections returns how many collections allocating total bytes of
// garbage, a KiB at a time, took.
func collections(total int) uint32 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range total >> 10 {
		sink = make([]byte, 1<<10)
	}
	runtime.ReadMemStats(&after)
	return after.NumGC - before.NumGC
}

func TestStartCollectsLess(t *testing.T) {
	if p := debug.SetGCPercent(basePercent); p != basePercent {
		debug.SetGCPercent(p)
		t.Skipf("GOGC is %d here, not %d: the comparison below assumes the default", p, basePercent)
	}
	runtime.GC()
	const total = 512 << 20
	without := collections(total)
	stop, ok := Start(64 << 20)
	if !ok {
		t.Fatal("Start did not start")
	}
	if stop2, ok := Start(1 << 30); ok {
		stop2()
		t.Fatal("a second Start started a second floor")
	}
	runtime.GC() // Start's first percent is from an earlier live heap: start from this one
	with := collections(total)
	stop()
	stop() // a second stop does nothing
	if got := debug.SetGCPercent(basePercent); got != basePercent {
		t.Errorf("after stop, the GC percent is %d, want %d", got, basePercent)
	}
	t.Logf("collections for %d MiB of garbage: %d at GOGC=100, %d with a 64 MiB floor", total>>20, without, with)
	// At GOGC=100 and a live heap of a few MiB, the goal is the runtime's
	// least, 4 MiB: a collection every few MiB. With the floor, every
	// 64 MiB or so.
	if with > total/(32<<20) {
		t.Errorf("with a 64 MiB floor, %d collections for %d MiB of garbage, want at most %d", with, total>>20, total/(32<<20))
	}
	if without < 4*with {
		t.Errorf("GOGC=100 took %d collections, the floor %d: want the floor's at least 4 times fewer", without, with)
	}
}

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, roots, floor uint64
		want               int
	}{
		{0, 0, 0, 100},
		{10 << 20, 0, 0, 100},
		{0, 0, 64 << 20, 1600},              // no live heap: the least goal, 4 MiB × 16, is the floor
		{1 << 20, 0, 64 << 20, 1625},        // floor/live is 6400, but the least goal would be 256 MiB
		{16 << 20, 0, 64 << 20, 400},        // goal 16 + 64 MiB
		{32 << 20, 0, 64 << 20, 200},        // goal 32 + 64 MiB
		{64 << 20, 0, 64 << 20, 100},        // the floor's goal is GOGC=100's
		{1 << 30, 0, 64 << 20, 100},         // a large live heap: GOGC=100's
		{5 << 20, 0, 64 << 20, 1280},        // 64/5
		{1, 0, 1 << 62, 1 << 30},            // capped
		{12 << 20, 0, 1 << 20, 100},         // a floor under the live heap
		{3 << 20, 0, 8 << 20, 266},          // 8/3 = 2.66, least goal 4 × 2.66 ≤ 11 MiB
		{100 << 10, 0, 8 << 20, 202},        // the least goal bounds it: (0.1 + 8) × 25
		{4 << 20, 4 << 20, 64 << 20, 800},   // the runtime grows live + roots, 8 MiB, by the percent: 64/8
		{1 << 20, 8 << 20, 64 << 20, 711},   // 64/9
		{0, 1 << 20, 64 << 20, 1600},        // the least goal bounds it again
		{0, 64 << 20, 64 << 20, 100},        // roots as large as the floor: GOGC=100's
		{16 << 20, 48 << 20, 64 << 20, 100}, // so are live + roots
		{1 << 62, 1 << 62, 1 << 62, 100},    // no overflow
	} {
		if got := Percent(c.live, c.roots, c.floor); got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.live, c.roots, c.floor, got, c.want)
		}
	}
}

func TestStartAfterStop(t *testing.T) {
	stop, ok := Start(8 << 20)
	if !ok {
		t.Fatal("Start did not start")
	}
	stop()
	if stop, ok = Start(8 << 20); !ok {
		t.Fatal("Start after stop did not start")
	}
	stop()
	if _, ok := Start(0); ok {
		t.Error("Start(0) started")
	}
}

// TestRefusedStartStopsNothing: the stop of a Start that was refused
// (what cmd/hotlimitd's second run in one process calls when it returns)
// leaves the running floor and its percent alone.
func TestRefusedStartStopsNothing(t *testing.T) {
	// A floor far over any live heap here, whose percent is over
	// basePercent whatever the last collection found (the collections of
	// TestStartCollectsLess's allocation loop count what it allocated
	// during their mark as live: tens of MiB on a loaded machine).
	tu := startTuner(t, 4<<30)
	for _, floor := range []uint64{8 << 20, 0} {
		stop2, ok := Start(floor)
		if ok {
			t.Fatalf("Start(%d) started a second floor", floor)
		}
		stop2()
		still := currentTuner() == tu
		tu.mu.Lock()
		want := tu.percent                  // the tuner's, which it changes under mu only
		p := debug.SetGCPercent(tu.percent) // the runtime's: set back as it was
		tu.mu.Unlock()
		if !still || p != want || p <= basePercent {
			t.Errorf("after the refused Start(%d)'s stop: floor still running %v, GC percent %d, want the floor's %d (over %d)", floor, still, p, want, basePercent)
		}
	}
}

func TestSize(t *testing.T) {
	for in, want := range map[string]Size{
		"0": 0, "0B": 0, "17": 17, "17B": 17, "1KiB": 1024, "64MiB": 64 << 20,
		"3GiB": 3 << 30, "2TiB": 2 << 40, "1024TiB": 1 << 50,
	} {
		var s Size
		if err := s.Set(in); err != nil || s != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, s, err, want)
		}
	}
	for _, in := range []string{"", "B", "MiB", "-1", "+1", "1.5MiB", "1 MiB", "1mib", "1MB", "1K", "0x10", "1_000", "1025TiB", "99999999999999999999"} {
		var s Size
		if err := s.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, s)
		}
	}
	for s, want := range map[Size]string{0: "0B", 17: "17B", 1024: "1KiB", 1536: "1536B", 64 << 20: "64MiB", 1 << 50: "1024TiB"} {
		if got := s.String(); got != want {
			t.Errorf("Size(%d).String() = %q, want %q", uint64(s), got, want)
		}
	}
}

// percentAfterCollections collects until the running floor's percent is
// one done accepts, or about 10 s have passed, and returns the runtime's
// percent then.
func percentAfterCollections(t *testing.T, done func(int) bool) int {
	t.Helper()
	tu := currentTuner()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		runtime.GC() // the cleanup runs on its own goroutine after it
		tu.mu.Lock()
		p := tu.percent
		tu.mu.Unlock()
		if done(p) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	tu.mu.Lock()
	defer tu.mu.Unlock()
	p := debug.SetGCPercent(tu.percent) // the runtime's: set back as it was
	return p
}

// TestFollowsLiveHeap: the percent is set again after each collection,
// from its live heap: back to GOGC=100's once the live heap outgrows the
// floor, up again once it shrinks.
func TestFollowsLiveHeap(t *testing.T) {
	stop, ok := Start(8 << 20)
	if !ok {
		t.Fatal("Start did not start")
	}
	defer stop()
	runtime.GC()
	live := make([][]byte, 32)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	if p := percentAfterCollections(t, func(p int) bool { return p == basePercent }); p != basePercent {
		t.Errorf("with 32 MiB live and an 8 MiB floor, the GC percent is %d, want %d", p, basePercent)
	}
	runtime.KeepAlive(live)
	live = nil
	if p := percentAfterCollections(t, func(p int) bool { return p > basePercent }); p <= basePercent {
		t.Errorf("with the 32 MiB gone and an 8 MiB floor, the GC percent is %d, want over %d", p, basePercent)
	}
}

// TestUserGOGC: UserGOGC reports a GOGC set only when the runtime reads
// it as the user's (off or a 32-bit integer), not one it takes as 100.
func TestUserGOGC(t *testing.T) {
	for _, tc := range []struct {
		v   string
		set bool
	}{
		{"off", true}, {"100", true}, {"50", true}, {"0", true}, {"-1", true}, {"+200", true},
		{"", false}, {"fast", false}, {"OFF", false}, {"100%", false}, {" 100", false},
		{"4294967296", false}, // over 32 bits: the runtime reads 100
	} {
		t.Setenv("GOGC", tc.v)
		v, set := UserGOGC()
		if set != tc.set || set && v != tc.v || !set && v != "" {
			t.Errorf("GOGC %q: UserGOGC() = %q, %v; want set %v", tc.v, v, set, tc.set)
		}
	}
	os.Unsetenv("GOGC") // t.Setenv puts it back
	if v, set := UserGOGC(); set || v != "" {
		t.Errorf("GOGC unset: UserGOGC() = %q, %v; want \"\", false", v, set)
	}
}
