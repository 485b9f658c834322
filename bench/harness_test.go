package bench

import (
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
)

// extraImpls is filled by adapters_hotlimit_test.go (hotlimit's own
// variants); they are listed right after the baseline.
var extraImpls []impl

// allImpls returns the baseline first (benchstat compares every column
// with the first), then hotlimit's variants, then the other peers.
func allImpls() []impl {
	p := peers()
	out := make([]impl, 0, len(p)+len(extraImpls))
	out = append(out, p[0])
	out = append(out, extraImpls...)
	out = append(out, p[1:]...)
	return out
}

// keyedImpls returns the implementations that hold one bucket per key.
func keyedImpls() []impl {
	var out []impl
	for _, im := range allImpls() {
		if im.keyedOK {
			out = append(out, im)
		}
	}
	return out
}

// defaultKeys is the number of distinct keys of the many-keys workloads.
const defaultKeys = 1_000_000

// numKeys reads HOTLIMIT_BENCH_KEYS (e.g. 10000 for CI), else defaultKeys.
func numKeys(tb testing.TB) int {
	s := os.Getenv("HOTLIMIT_BENCH_KEYS")
	if s == "" {
		return defaultKeys
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		tb.Fatalf("HOTLIMIT_BENCH_KEYS=%q: want a positive integer", s)
	}
	return n
}

// keyName formats key i as user:NNNNNN (six digits at least).
func keyName(i int) string {
	return string(appendKey(make([]byte, 0, 16), i))
}

func appendKey(buf []byte, i int) []byte {
	buf = append(buf, "user:"...)
	s := strconv.Itoa(i)
	for n := len(s); n < 6; n++ {
		buf = append(buf, '0')
	}
	return append(buf, s...)
}

var (
	keysMu    sync.Mutex
	keysCache = map[int][]string{}
)

// keySet returns the k strings user:000000 ... built once per process and
// shared by every benchmark, so no key is formatted inside a timed loop.
func keySet(k int) []string {
	keysMu.Lock()
	defer keysMu.Unlock()
	if ks, ok := keysCache[k]; ok {
		return ks
	}
	ks := make([]string, k)
	for i := range ks {
		ks[i] = keyName(i)
	}
	keysCache[k] = ks
	return ks
}

// seqLen is the length of a pre-generated index sequence: a power of two,
// so the loops wrap with a mask. 1<<20 int32s are 4 MiB.
const seqLen = 1 << 20

type distribution int

const (
	uniform distribution = iota
	zipf
)

func (d distribution) String() string {
	if d == zipf {
		return "Zipf"
	}
	return "Uniform"
}

// zipfS is the Zipf exponent of the skewed workloads.
const zipfS = 1.1

var (
	seqMu    sync.Mutex
	seqCache = map[[2]int][]int32{}
)

// indexSeq returns seqLen key indexes in [0,k) drawn from d with a fixed
// seed, built once per process: picking a key in a timed loop is one load.
// Zipf ranks are mapped through a fixed random permutation so that the hot
// keys are not also the first-inserted ones.
func indexSeq(d distribution, k int) []int32 {
	seqMu.Lock()
	defer seqMu.Unlock()
	ck := [2]int{int(d), k}
	if s, ok := seqCache[ck]; ok {
		return s
	}
	r := rand.New(rand.NewPCG(0x686f746c, uint64(k)))
	s := make([]int32, seqLen)
	switch d {
	case uniform:
		for i := range s {
			s[i] = int32(r.IntN(k))
		}
	case zipf:
		perm := r.Perm(k)
		z := rand.NewZipf(r, zipfS, 1, uint64(k-1))
		for i := range s {
			s[i] = int32(perm[z.Uint64()])
		}
	}
	seqCache[ck] = s
	return s
}
