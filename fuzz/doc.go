// Package fuzz holds hotlimit's fuzz targets. They check oracles, not only
// the absence of panics:
//
//   - FuzzDecisions decodes a policy and a stream of operations (clock
//     advances, AllowN, Wait, sweeps) and requires, at every step, the same
//     decisions as internal/refmodel, honest RetryAfter/ResetAfter/Remaining,
//     unchanged state after a denial, the algorithm's admission envelope
//     (tracked independently of both implementations), and identical
//     decisions from a twin limiter that is swept before every operation.
//   - FuzzStaleClock does the same with a clock that can also be set back:
//     a stale reading must count as "no time has passed".
//   - FuzzNew feeds New arbitrary configurations: it must either return an
//     error prefixed "hotlimit: " or a limiter that agrees with the model on
//     a short sequence of extreme operations.
//   - FuzzConcurrentTotals (and TestConcurrentTotals) hammer keys from
//     several goroutines with the clock frozen and require exact totals.
//
// Inputs the fuzzers found are kept in testdata/fuzz/<Target>/ and run
// with the seeds by a plain `go test ./fuzz`. Bugs found outside this
// package and not yet fixed are reproduced by TestKnownBugs
// (HOTLIMIT_KNOWN_BUGS=1). The package itself is empty; everything lives in
// its _test.go files. Run `bash fuzz/run.sh 30s` to fuzz every target for
// 30 seconds.
package fuzz
