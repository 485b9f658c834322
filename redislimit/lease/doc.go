// Package lease shares a rate limit's budget across instances through
// Redis, and decides at in-process speed: each instance leases units from
// the shared token bucket or fixed window and spends them locally.
//
// # Contract
//
// A lease is taken by one Lua script that debits its units from the key's
// shared state in Redis (the state redislimit keeps, under the same key)
// before any of them is spent. An instance spends only units Redis has
// already debited, so the units admitted across all instances never exceed
// what the shared policy grants, under any interleaving, crash or
// partition: a crash or a lost reply loses units, it never creates them.
//
// While a key's lease holds the cost, AllowN decides in process: one
// lookup in a sync.Map (no lock and no allocation for a key it holds) and
// a compare-and-swap on the lease's counter (and a clock read for a fixed
// window), with no allocation and no round trip. When the lease drops to half of its last
// refill (the low-water mark), one refill is sent in the background; a
// flag per key keeps at most one take in flight. A request the lease
// cannot cover takes a lease of at least its cost from Redis before it is
// answered; Redis's denial is remembered until its retry time, so a
// denied key does not cost a round trip per request (units that other
// instances give back meanwhile are not seen until then). When Redis cannot be
// reached, the failure policy answers for that key: fail closed (deny, the
// default), WithFailOpen (admit), or any redislimit.FailurePolicy given
// with WithRedis, with an error wrapping ErrUnavailable.
// Units already leased are spent while Redis is down.
//
// # Lease size and the price of the mode
//
// A refill asks for the units the key spent on this instance over the last
// refill interval, scaled to WithPeriod (100ms by default), at least 1,
// and never so many that the instance would hold more than WithMaxLease
// units of the key (a tenth of the limit by default), counting the units
// it holds and those of its take in flight. So at any instant, the units
// of one key's budget debited in Redis but unspent are at most
// n·MaxLease for n live instances, plus what crashed instances held.
// That is the price: an instance can be denied while others hold unspent
// units (under a fixed window, at most n·MaxLease of a window's Limit go
// unused because of leases).
//
// # Token bucket
//
// Leased tokens are real tokens and do not expire. Over the whole run the
// fleet admits at most Burst + ⌊t/T⌋ units of a key by time t (T the
// emission interval), as the shared bucket would. But a token debited
// early may be spent later, after the bucket has refilled, so in any
// interval [a, b] the fleet admits at most Burst + ⌊(b−a)/T⌋ + U(a),
// where U(a) ≤ n·MaxLease is what the leases held unspent at a (with
// their takes in flight), and this bound is reached: the burst can be
// exceeded by the units held in leases. Choose MaxLease accordingly.
//
// Giving units back (Close, or Sweep for idle keys) undoes only part of
// the instance's last take, and only when the bucket's state is still the
// one that take wrote (nothing was debited since): the bucket is then
// exactly as if those units had never been taken. Otherwise, and for
// units carried from earlier takes (the bucket may have refilled past
// them), nothing is given back: giving them back could make the bucket
// more generous than its history allows.
//
// # Fixed window
//
// A lease belongs to one window: the script replies with the window's
// index and the time left in it, and the instance spends the units only
// until its clock (WithClock) reaches the instant it sent the take plus
// that time left, which is never after the window's end on the server,
// provided the instance's clock runs no slower than the server's. So every
// window admits at most Limit across the fleet. A give-back names its
// window and the script applies it only in that same window, and only the
// units taken from the key's current state: after a Reset (redislimit's
// Limiter.Reset, which gives the key's state a new incarnation; see
// redislimit's "Give-backs") nothing taken before it is given back, in
// either policy, even when the new state looks like the old one.
//
// # The other policies
//
// The sliding-window counter weighs the previous window's count, which a
// lease cannot hold still: units leased at the end of window k also count,
// decaying, against window k+1, so a lease taken in k+1 must be sized
// against a weight that changes as it is spent; an honest version would
// lease from the current window only what fits under the previous
// window's full weight, which wastes most of the budget early in a window.
// The sliding log records the instant of every admission, which a lease
// spent later cannot report. The leaky bucket (GCRA with Delay) paces
// requests; a lease of paced slots would have to carry each slot's
// instant. None of these is built here.
//
// # Redis Cluster
//
// Each take and give-back names one key, so on a *redis.ClusterClient it
// goes to the master of the key's slot, and keys spread over the cluster
// (named as redislimit names them). A MOVED or ASK reply during
// resharding is followed as redislimit follows it (the node that replied
// did not run the script), while the leases already held go on being
// spent.
//
// # Decisions, options and HTTP
//
// Decide reports each request as a hotlimit.Decision: Limit exact,
// Remaining the units this instance's lease holds after it, RetryAfter
// Redis's for a refused cost, ResetAfter the time until the shared state
// is fresh as the last take saw it (see Decide for the bounds). AllowN is
// its Allowed.
//
// Every call to Redis goes through a redislimit.Limiter built with the
// same name and policy, so WithRedis takes redislimit's options: its key
// layout and WithHashTag, timeout, Breaker (one circuit per node: with
// Redis down, a request the lease cannot cover fails fast once the
// circuit opens), Hooks and FailurePolicy (FailClosed, FailOpen or an
// in-process FallbackLocal).
//
// Backend puts leases behind httplimit's middleware or grpclimit's
// interceptor (admission.Backend): each request's layers are decided in
// process, all or nothing, and the rate-limit fields come from the
// Decisions.
//
// Mode makes the same leases a mode of redislimit's own Limiter:
// redislimit.New(client, name, policy, redislimit options..., Mode()) is
// a redislimit.Limiter whose AllowN and AllowLayers decide from leases,
// and redislimit.BackendFactory(client, ..., Mode()) a RedisBackend that
// does, each with redislimit's options, breaker, hooks and failure policy
// as they are.
//
// # What it does not do
//
// Give-backs to Redis happen on Close and on Sweep, which the application
// calls (there is no timer of its own). A Backend's layered refusal names
// the layer that refused, without checking the layers after it, and its
// per-layer Window is unknown (hotlimit.Never).
package lease
