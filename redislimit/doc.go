// Package redislimit runs hotlimit's policies on Redis, so that several
// processes (replicas behind a load balancer) share one quota per key.
// A start (Example adds a timeout, a failure policy and a cache of
// denials):
//
//	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", MaxRetries: -1}) // a retry could consume twice
//	lim, err := redislimit.New(client, "api", hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 20})
//	// err names a bad policy, as hotlimit.New does; defer lim.Close()
//	d, err := lim.Allow(ctx, apiToken) // d is a hotlimit.Decision; err: Redis failed, the failure policy answered
//
// It implements the token bucket (GCRA), the leaky bucket (with Delay),
// the fixed window, the sliding-window counter and the exact sliding log
// with the Decision semantics of the in-process hotlimit.Limiter (see
// hotlimit.Decision): the same Allowed, Remaining, RetryAfter, ResetAfter
// and Delay on the same trace, to the microsecond, alone and in layers.
// AdmitN with Admission.Refund, Reset and Wait behave as hotlimit's do,
// and Concurrency limits
// the operations in flight per key. The package's tests check this
// decision for decision, against a real redis-server and a real Redis
// Cluster (redislimit/test.sh starts both on loopback ports). It needs
// Redis 6.0 or later, as one server or as a Cluster (7.0 or later to batch
// decisions on a Cluster).
//
// # One round trip per decision
//
// Each decision, for one limit or several layered ones, is one Lua script,
// loaded once and then called by its SHA1 (sent again transparently after
// a NOSCRIPT reply, which is safe: the script did not run). The script
// reads the server's clock (TIME), so application clocks never matter,
// and works in integer microseconds. Lua numbers are doubles, exact below
// 2^53: New bounds every interval, window and limit by 2^50, and the
// script forms no product that could pass 2^53 (the sliding window's
// p·(W−e) with a 24-hour window and a limit of 10^6 is 8.64·10^16): it
// multiplies and divides exactly, by shift-and-add on quotient and
// remainder. Every key is passed in KEYS (except in a batch on a Redis
// Cluster, which passes its keys as arguments: see below), and every write
// sets a TTL of the time until the key is fresh again, rounded up to a
// millisecond.
//
// Microseconds: a bucket's interval T = ⌈Per/N⌉ is rounded up to a
// whole microsecond, towards denying (PerSecond(3) admits one request per
// 333,334 µs); windows must be a whole number of microseconds, or New
// rejects them. Durations in a Decision are whole microseconds. New also
// rejects every policy that hotlimit.New rejects, so the same policy
// always works in process too (WithFallbackLocal).
//
// Concurrent decisions on one *redis.Client share calls: a decision that
// finds two calls of the client already in flight waits for one of them
// to finish and then goes out in one script call with every decision that
// waited meanwhile, decided in order at one instant of the server's clock
// (see batch.go). A serial caller never waits for a batch. Under 64
// concurrent callers on a loopback server this decided about 3 times as
// many requests per second as one call per decision, for 0.4 times the
// server's CPU per decision (the redisbench module's RESULTS.md, see Cost
// below). A batch is one call: a timeout or an outage fails each of its
// decisions, as it would have failed each call; a script error of one
// decision (its key holds another type) fails that one alone. Each caller
// waits for the batch only as long as its own context allows, and the
// batch runs until the latest of its callers' deadlines, so a caller with
// little time left fails no other. What a go-redis hook (tracing, logging)
// sees of the caller's context: every call carries its caller's context
// values, except a batch, which carries those of its first (oldest)
// decision's caller; each caller's own Hooks see its decision on its own
// goroutine (see Hooks).
//
// On a Redis Cluster, decisions batch per master: those bound for one
// node go in one script call whatever their slots, with the same order,
// deadlines, failure policy and isolation. That call declares no key (a
// call's declared keys must share a slot) and passes each decision's keys
// as arguments, which Redis 7 lets a script with the allow-cross-slot-keys
// flag touch on the node that holds them; the node still refuses every key
// it does not hold. A decision of a batch whose key the node no longer
// holds (its slot moved, or is migrating and the key already left) fails
// on its first read, before writing anything, and is sent again alone,
// following the MOVED or ASK reply as any call does, so resharding stays
// exact. Against a Cluster of Redis older than 7.0, which cannot compile
// the flag, the first batch is sent again decision by decision and the
// client stops batching. Each master has one batch in flight at a time.
// On a 3-master loopback Cluster under 64 callers this decided about 2.7
// times as many requests per second as redis_rate, for 0.53 times its
// masters' CPU per decision (the redisbench module's RESULTS.md).
//
// Admission.Refund, Reset and Wait's reservation are one call each of a
// second script (ops.lua). Wait on a bucket reserves its slot in Redis and
// sleeps until it (giving it back if the context ends first), as
// hotlimit's Wait does.
//
// Cost, serially on loopback beside a PING on the same client (medians;
// the redisbench module's RESULTS.md has the command and the machine,
// https://github.com/hotlimit/hotlimit/blob/main/bench/redisbench/RESULTS.md): one
// decision of any policy is one round trip, and its server time is what
// sets it apart from a PING: about 10µs of Lua for a token bucket (a
// script that only reads TIME, GETs and SETs takes about 7µs), about 22µs
// for three bucket layers.
//
// # Concurrency
//
// Concurrency limits the operations in flight per key across instances,
// as hotlimit.ConcurrencyLimiter does in one process. Each permit is a
// lease in a sorted set on the key: released, or renewed while a long
// operation runs, or lost when its lease ends, so that the units of a
// holder that crashed are free again after at most the lease.
//
// # Keys
//
// The state of key under a limiter named name is the Redis key
// prefix + name + ":{" + key + "}" (prefix "hotlimit:" unless WithPrefix
// says otherwise), one key per (limit, key). The braces are a Redis
// Cluster hash tag: the keys of one identity under several limits share a
// slot, and identities spread over the cluster. The empty key and keys
// that start with "}", whose tag Redis would read as empty, are stored as
// prefix + name + "!{~}" + key, so that they too share a slot across
// limits. A layered call's keys must all be in one slot; for layers keyed
// differently (per token, per IP, global), give every limiter involved
// the same WithHashTag(tag), which makes the keys
// prefix + "{" + tag + "}" + name + ":{" + key + "}", all on one node.
// On a Redis Cluster a layered call whose keys span slots fails with
// ErrCrossSlot and a denial, before any round trip and whatever the
// failure policy: a configuration that cannot work is an error, never a
// silent fail-open. Names and prefixes must not contain a brace, so two
// limiters never share a Redis key, whatever keys they are given.
//
// # State in Redis
//
// A key's state is one Redis string, with a TTL of the time until it is
// fresh again: a bucket's theoretical arrival time in µs, a sliding
// window's "k p q" (its window index, the previous and the current
// window's counts), a sliding log's instants. A fixed window of a Limit
// below 2^20 stores its window index k and its count q packed in one
// integer, −((k+1)·2^21 + q), while k+2 ≤ 2^32 (k is the server's time
// over the window: windows of a second or more until the year 2106, of
// half a second until 2038): a decision counts its cost in each layer with one
// DECRBY, sets the TTL once (at its window's first admission), and takes
// the cost back with INCRBY (or deletes a key it created) when a layer
// denies, so a denial leaves every key as it was. That is about half of
// redis-server's CPU per decision of the string it replaced (the
// redisbench module's BenchmarkWindows, 1 and 3 layers under 32 and 64
// callers). A fixed window of a larger Limit or a shorter window stores
// "k 0 q", as every fixed window did before the packed state, and so does
// a give-back (Admission.Refund, a lease's) that leaves a count of 2^21
// or more, which a larger Limit of the same name can leave. Every
// script reads both, so a key that an earlier version wrote is read as it
// says (and packed at its next admission); an earlier version reads a
// packed state as no state, so while instances of both versions share a
// Redis (a rolling upgrade) a fixed window may admit up to its Limit more
// per key and window. A key holding another Redis type fails its
// decision with Redis's error (WRONGTYPE), having changed nothing.
//
// A window state does not record its Window. When a policy's Window grows
// under the same name (a change under traffic, two versions of a
// deployment), a state of the old Window reads as one of a window far
// ahead: a script tells it from a stale reading (below) because it starts
// after its key expires (PTTL), which a state of its own window never
// does, since Redis expires keys by the clock TIME reads; its counts then
// carry over into the window holding now, as hotlimit's SetPolicy carries
// them, and its TTL is that window's (two, for a sliding window's current
// count). When the Window shrinks, the old index reads as a window long
// past and the state as fresh: unlike SetPolicy, which carries the counts
// over, the key may then admit its new Limit again at once.
//
// # The server's clock
//
// Decisions follow the server's clock (TIME). When it goes back (a
// failover to a replica whose clock is behind, a clock stepped back), a
// key whose state is from a later instant than the reading is decided as
// hotlimit decides a stale reading (docs/semantics.md, "Stale readings"):
// no time has passed, a bucket at its TAT, a window at the start of the
// window its state is in (whatever its counts: RetryAfter and ResetAfter
// then run the whole window), the sliding log at its newest instant; its
// counts still count, so a clock set back never admits more, and each
// write keeps the key until its state's own end (a window's, a TAT), later
// than a window from the reading. The script
// cannot know how much time really passed, so its ResetAfter then differs
// from that of a hotlimit.Limiter whose own monotonic clock did not go
// back (a whole window of 2s where the in-process limiter, 1,481 ms into
// that window, says 519ms). A key without a state (never written, expired,
// deleted, or only ever denied: a denial writes nothing) is decided at the
// reading, however old. hotlimit.AllowLayers consumes the layers before
// the one that denies and then gives them back, which leaves each a state
// of no units in the reading's window; redislimit writes nothing, so after
// a clock set back below that window the two can decide differently.
//
// # Failure policy
//
// Redis can be down, slow or unreachable; the limiter then cannot decide,
// and says so: the call returns an error wrapping ErrUnavailable and the
// cause, together with the Decision of the limiter's failure policy:
//
//   - by default it fails closed: it denies the request;
//   - WithFailOpen admits it;
//   - WithFallbackLocal decides it with an in-process hotlimit.Limiter of
//     the same policy: the limit then holds per process. Use this for
//     security-sensitive limits (logins), which must not open.
//
// Every call has a timeout (WithTimeout, default 100ms) on top of the
// caller's context. A call is never retried once sent: one that timed out
// after its script was sent may have consumed quota, so its outcome is
// unknown and the failure policy answers. (The client must therefore not
// retry either: New requires MaxRetries: -1 and ContextTimeoutEnabled:
// true of go-redis clients, and MaxRedirects: -1 of a ClusterClient.) A
// call that was never sent is sent again once: one that failed to dial
// goes out on a spare connection of the same node, which go-redis's pool
// back-off after repeated failed dials does not hold up.
//
// A Breaker keeps one circuit per node (a github.com/sony/gobreaker/v2
// breaker). A node's circuit opens after consecutive failures (5 unless
// NewBreaker says otherwise) so that a dead node costs one fast failure
// (ErrCircuitOpen) per request rather than a timeout; after a cool-down
// (1s) one probe goes through, and its success closes it. A reply error
// from a live server does not count, nor does a call whose caller's
// context had ended before it was sent. On a Redis
// Cluster, one dead master fails only the keys it serves.
//
// # Redis Cluster
//
// On a *redis.ClusterClient each call goes to the master of its slot.
// During resharding a node answers MOVED or ASK instead of running the
// script; the limiter follows the reply (with ASKING for ASK) and reloads
// the client's slot map after MOVED, so decisions go on through a slot
// migration. Following a redirection cannot consume twice: the node that
// replied did not run the script.
//
// # Two tiers
//
// WithLocalDenials keeps, in process and bounded in size, the calls Redis
// denied and until when, and answers the same calls locally until their
// RetryAfter, counted from when the call was sent: an abusive client costs
// no round trip per request. A layered call is answered only when it is
// the same call (layers, keys and costs), with the Decision Redis gave it.
// A denial stays true until its RetryAfter whatever others consume, so
// this never admits more than Redis would. It can deny longer than Redis
// would: after a give-back or Reset on another instance, or after Redis
// lost its data (a flush, a restart without persistence). Give-backs and
// Reset
// drop the key's entry on their own instance, a call that finds the
// server unreachable empties the caches of its layers, and ForgetDenials
// empties a limiter's cache on demand.
//
// # Give-backs
//
// A give-back (Admission.Refund for an admission AdmitN recorded, a Wait
// cancelled while it sleeps) refers to its admission, not to its key, and
// gives back only what the key's state still owes to it, with the rules of
// hotlimit's Admission (see Admission): nothing once the state was deleted
// and created again, and for the buckets never units that refilled since.
// There is no give-back by key alone: it could return units that another
// admission, a Reset or time had already accounted for. A key's state
// deleted by Reset, or left fresh by a give-back, gets a new incarnation, a
// number stored under a second Redis key in the same slot (the state key
// with "#" in place of the ":" after the limiter's name) for as long as the
// deleted state could still have owed anything; the decisions' scripts
// never read it, so it costs nothing to AllowN. A state that Redis itself
// drops (maxmemory eviction, a flush) keeps no incarnation: an earlier
// admission's give-back may then land in the new state, as the lost state
// already lets the key admit again. Worse, a maxmemory policy that evicts
// (any allkeys-* policy, and the volatile-* ones too, since both keys
// carry a TTL) can evict the second key alone while the state stays: a
// give-back of an admission that a renewal or a Reset had already
// accounted for is then taken as current, and may return units twice.
// Give the Redis that holds the limits maxmemory-policy noeviction (a
// write refused for memory is a failed call, which the failure policy
// answers), or accept that eviction makes give-backs inexact.
//
// Bucket give-backs may come in any order, from any instance, as in
// process: a give-back below later admissions (which moves their units
// down) renews the state and records where it removed time from, after
// the incarnation under the same second key, and a later give-back of one
// of those admissions replays the renewals since its own, so it returns
// exactly what its units still hold, at any instant, unless it has seen
// more than 16 renewals; an admission that old is given back from their
// floor, exact at one frozen instant and never more than its units hold
// (docs/semantics.md, "Give-backs", and ops.lua, "Renewals", state the
// rule, hotlimit's). Each renewal is one script call, atomic on the key's
// slot, as on a Redis Cluster. The renewals make the second key at most
// about 0.9 KB in Redis (MEMORY USAGE with 16: 872 bytes on Redis 7.0,
// where a bucket's state takes 104), and it expires with the state they
// describe; a Reset or a give-back that leaves the state fresh drops them.
//
// # Leases
//
// WithLeases puts a Limiter (and so every limit of a RedisBackend built
// with it) in lease mode: it decides at in-process speed from units it
// leases from the same state in Redis, for a token bucket or a fixed
// window. A lease is taken by one Lua script (lease.lua) that debits its
// units from the key's state, under the same Redis key, before any of
// them is spent. An instance spends only units Redis has already debited,
// so the units admitted across all instances never exceed what the shared
// policy grants, under any interleaving, crash or partition: a crash or a
// lost reply loses units, it never creates them.
//
// While a key's lease holds the cost, AllowN decides in process: one
// lookup in a sync.Map (no lock and no allocation for a key it holds), a
// compare-and-swap on the lease's counter and a clock read, with no
// allocation and no round trip. When the lease drops to half of its last
// refill (the low-water mark), one refill is sent in the background; a
// flag per key keeps at most one take in flight. A request the lease
// cannot cover takes a lease of at least its cost from Redis before it is
// answered; Redis's denial is remembered until its retry time, so a
// denied key does not cost a round trip per request (units that other
// instances give back meanwhile are not seen until then). When Redis
// cannot be reached, the failure policy answers for that key, with an
// error wrapping ErrUnavailable; units already leased are spent while
// Redis is down.
//
// A refill asks for the units the key spent on this instance over the
// last refill interval, scaled to the lease period (100ms by default), at
// least 1, and never so many that the instance would hold more than
// maxLease units of the key (a tenth of the limit by default), counting
// the units it holds and those of its take in flight. So at any instant,
// the units of one key's budget debited in Redis but unspent are at most
// n·maxLease for n live instances, plus what crashed instances held. That
// is the price: an instance can be denied while others hold unspent units
// (under a fixed window, at most n·maxLease of a window's Limit go unused
// because of leases).
//
// Token bucket: leased tokens are real tokens and do not expire. Over the
// whole run the fleet admits at most Burst + ⌊t/T⌋ units of a key by time
// t (T the emission interval), as the shared bucket would. But a token
// debited early may be spent later, after the bucket has refilled, so in
// any interval [a, b] the fleet admits at most Burst + ⌊(b−a)/T⌋ + U(a),
// where U(a) ≤ n·maxLease is what the leases held unspent at a (with their
// takes in flight), and this bound is reached: the burst can be exceeded
// by the units held in leases. Choose maxLease accordingly. Giving units
// back (Close, or SweepLeases for idle keys) undoes only part of the
// instance's last take, and only when the bucket's state is still the one
// that take wrote (nothing was debited since): the bucket is then exactly
// as if those units had never been taken. Otherwise, and for units
// carried from earlier takes (the bucket may have refilled past them),
// nothing is given back: giving them back could make the bucket more
// generous than its history allows.
//
// Fixed window: a lease belongs to one window. The script replies with
// the window's index and the time left in it, and the instance spends the
// units only until its clock reaches the instant it sent the take plus
// that time left, which is never after the window's end on the server,
// provided the instance's clock (monotonic) runs no slower than the
// server's. So every window admits at most Limit across the fleet. A
// give-back names its window and the script applies it only in that same
// window, and only the units taken from the key's current state: after a
// Reset (a new incarnation, see Give-backs) nothing taken before it is
// given back, in either policy, even when the new state looks like the
// old one.
//
// The other policies are not leased. The sliding-window counter weighs
// the previous window's count, which a lease cannot hold still: units
// leased at the end of window k also count, decaying, against window k+1;
// an honest version would lease from the current window only what fits
// under the previous window's full weight, which wastes most of the
// budget early in a window. The sliding log records the instant of every
// admission, which a lease spent later cannot report. The leaky bucket
// paces requests; a lease of paced slots would have to carry each slot's
// instant.
//
// Each take and give-back names one key, so on a Redis Cluster it goes to
// the master of the key's slot, following MOVED and ASK as every call
// does, while the leases already held go on being spent. A layered call
// decides every layer from its lease, all or nothing (the units of the
// layers admitted before a refusal go back into their leases, where they
// stay debited in Redis), names the layer that refused without checking
// the layers after it, and reports each layer's Remaining as what its
// lease holds, with an unknown Window (hotlimit.Never). Give-backs to
// Redis happen on Close and on SweepLeases, which the application calls
// (there is no timer of its own).
//
// # Observability
//
// WithHooks installs functions that see, synchronously, each call's node,
// round-trip time and error (a timeout is an error that errors.Is
// context.DeadlineExceeded, or a net.Error whose Timeout is true), every
// decision a failure policy made with its error, every change of a node's
// circuit, every call refused as misconfigured (ErrCrossSlot,
// ErrMixedLayers), and every request the two-tier cache answered. With a failure
// policy set the caller may see no error; the hooks see all of them.
//
// # HTTP and gRPC
//
// BackendFactory builds a RedisBackend from a set of named limits, an
// admission.Backend, so httplimit's middleware and grpclimit's interceptor
// can use Redis unchanged; each request's layers are one script call, all
// or nothing (or, in lease mode, decided from leases). The same call reports each layer's
// state, so the RateLimit field has one item per limit, each with its own
// r and t (except when a cached denial answers: one item then), and
// Middleware.Reset unblocks a client in Redis and in this instance's
// cached denials.
//
// # What it does not do
//
// The quota is as durable as the Redis data: a restart without
// persistence, or a failover that loses writes, forgets consumption.
// Wait on a window or the sliding log polls (it sleeps until RetryAfter
// and tries again), as in process.
package redislimit
