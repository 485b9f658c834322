// Package linearize checks that hotlimit's limiters are linearizable: that
// every concurrent history of operations on them has the outcome of some
// sequential order of those operations, one that respects real time (an
// operation that returned before another was called comes first), in the
// sequential reference model of internal/refmodel. The checker is
// github.com/anishathalye/porcupine.
//
// A history is made by a few goroutines (4 by default) started together,
// each making random operations on a few keys (2) of one limiter "A" and,
// through AllowLayers, a second limiter "B":
//
//   - AllowN with costs from −1 to Limit+1 (peeks and invalid costs too);
//     its whole Decision is compared with the model's,
//   - AdmitN (its Decision compared) and, some operations later, the
//     Refund of its Admission, after whatever removed, reset or refilled
//     its key meanwhile; SetPolicy (between policies of the same
//     algorithm), Sweep (its count compared), Reset,
//   - Wait (the buckets): without a deadline; with a deadline that passed
//     between Wait's checks (refused at once, changing nothing); and with
//     a context that ends as soon as it sleeps, cut into its reservation
//     and the give-back of its slot, on a clock that may have moved
//     between the two,
//   - AllowLayers(A, B), and a third of the time with A's key in two
//     layers (one limit, decided for the two costs together), cut into
//     the steps it takes on each layer (A's admission, B's, A's give-back
//     when B refuses), each layer's own Decision (AllowLayersState) compared
//     with the model's (only Allowed for an admission B then refused, whose
//     Decision is a check after the give-back): AllowLayers as a whole is
//     documented not to be atomic. The clock may move between the layers:
//     B, and the give-back, read later instants than A. Now and then
//     AllowLayers() with no layers, refused with Never.
//
// A give-back refers to its admission: the model gives back, as the
// limiter does (see refund.go), what the state still owes to it (for the
// buckets, min(cost·T, end − now), with its time moved back as the
// give-backs below it since moved it: shard.go, "Renewals"), and nothing
// once the model has removed the key since (Sweep, Reset, a refund that
// left it fresh), whether or not a later request created it again.
// Give-backs come in any order, so bucket give-backs below later
// admissions, which renew the key, are part of the histories.
//
// For a ConcurrencyLimiter: TryAcquireN, AcquireN (a failure of a waiter
// whose context ended is always legal), Release (also twice), InFlight and
// Sweep.
//
// Time. A shared clock is not linearizable as such: a goroutine reads the
// clock, is preempted, and decides on that reading after others decided
// on later ones, and the contract says what that must do ("a reading older
// than what a key's state reflects counts as no time having passed"). So
// the instant an operation reads is part of its input: the limiters' clock
// returns to each goroutine the instant of the operation it runs (see
// Recorder). The generator moves the shared instant forward as the history
// goes on (clock moves) and gives a third of the operations an older one
// (a preempted goroutine, or a clock set back). The model decides each
// operation at its own instant, including the floor sweeps and removals
// set for keys created later (sweptAt).
//
// Sweep removes keys shard by shard, each under its shard's mutex, so it
// is one step only within a shard: the histories' limiters have one shard
// (and fewer keys than a sweep examines per lock hold), where the models'
// one-step Sweep is exact.
//
// Eviction (TestEvictLinearizable): the same operations on one key "k0"
// of an A under WithMaxKeys(1), while goroutine 0 now and then admits a
// key no other operation names ("e1", "e2", …), which evicts whatever A
// holds. With room for one entry an eviction's victim is the one other
// entry, so the model evicts as the limiter does. An insertion into a
// full A evicts, then decides its key as a key with no entry (owing until
// sweptAt, Limiter.vacant) under the table of that moment, and other
// requests run in between (a Sweep that raises sweptAt, a Reset, a
// SetPolicy, a peek that finds the victim gone), so it is two steps: the
// eviction, judged at the inserter's reading, and the decision. The
// limiter marks the instant between them (internal/testhook.Evicted; the
// recorder then yields, as a preemption would), and the history cuts the
// operation there (evictSplit). The room the eviction freed passes to the
// insertion that evicted (gc.go): in the model it stays reserved until that decision, so no other insertion fits
// in between, and an operation that inserts into a full A without having
// evicted is illegal. An insertion never evicts its own key inserted
// meanwhile by another request: it uses that entry. Give-backs, Waits
// (including one past its deadline, which evicts before its decision
// refuses) and layered requests straddle evictions.
// The sampling of larger limiters is random and is not modelled:
// its guarantee is a statistical property, tested in the root package
// (TestEvictionSampleUniform and the flood tests, concurrent ones
// included).
//
// Not covered: the sliding log, whose every operation holds a mutex, is
// covered by the differential tests and fuzzers of the root module.
//
// Running: `bash linearize/test.sh` runs the short check CI runs (10
// histories per algorithm and per test, 40 operations per goroutine, under
// the race detector, seconds). A long run:
//
//	cd linearize
//	LINEARIZE_HISTORIES=5000 LINEARIZE_OPS=60 go test -race -count=1 -timeout 0 .
//
// (Without -race, 2,000 histories per algorithm of TestRateLinearizable,
// LINEARIZE_OPS=60, took 80 s on a loaded 2-vCPU machine, and so did 1,000
// per algorithm of TestEvictLinearizable, 1.2 M operations of which 133,000
// were evictions; the race detector makes it several times slower.)
//
// LINEARIZE_SEED picks the first seed (each history uses the next), and
// LINEARIZE_WORKERS the goroutines. A history porcupine finds illegal is
// written as an HTML visualization (kept in the system's temporary
// directory with LINEARIZE_KEEP=1).
package linearize
