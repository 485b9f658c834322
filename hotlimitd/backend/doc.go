// Package backend builds the store that hotlimitd decides its requests
// with, from a kind and options (the -backend flag and its companions),
// and carries the limits' state across configuration reloads.
//
// A Store is an admission.Backend: every layer of a request (one per
// descriptor with a limit) is decided at once, all or nothing, and each
// layer's state after the decision comes from that decision. Its limits
// are named hotlimit policies, as hotlimitd's config names them.
//
// # Kinds
//
// Local keeps every limit in this process, one hotlimit.Limiter per
// limit: exact, fastest, and for one replica only (each replica would
// have its own quota).
//
// Redis decides each request in Redis or a Redis Cluster with one script
// call (redislimit): synchronous and exact across replicas. Every replica
// that uses the same Redis, Prefix, HashTag and limit name shares that
// limit's state: a key's state is the Redis key
// Prefix + name + ":{" + key + "}" (see redislimit's "Keys"), which
// depends on nothing else. On a Redis Cluster a request's keys must share
// a slot; see Options.HashTag. Options.TLS, RedisUsername and RedisPassword
// secure the connection (TLS, AUTH); with Options.SentinelMaster the
// addresses are Redis Sentinels and the Store decides on the master they
// name. When Redis does not answer, the decision
// fails with an error and the caller's failure policy applies.
// The breaker in front of each node counts a call that Redis did not
// answer within Options.Timeout, or whose connection failed; a call whose
// caller's context ended first (its deadline included) counts for
// nothing, so that a Redis slower than its callers' deadlines is not
// taken for a dead one.
//
// Lease decides in process from units this replica leased from the same
// Redis state (redislimit.WithLeases), debited in Redis before they are spent.
// What it promises, per limit and key, for n replicas:
//   - never more than the limit across the fleet: a fixed window admits
//     at most requests_per_unit per window in total (provided the
//     replicas' clocks run no slower than Redis's); a token bucket admits
//     at most Burst + t/T by time t, but in a short interval up to
//     n·MaxLease more than Burst, the units leases held unspent;
//   - not exact: a replica can refuse while others hold unspent units, so
//     up to n·MaxLease of a window's limit can go unused;
//   - a layer's Remaining (limit_remaining) is what this replica's lease
//     holds, not the fleet's, and its Window is unknown (hotlimit.Never);
//   - token bucket and fixed window limits only (Open and Update refuse
//     the others, naming the limit).
//
// # Reloads
//
// Update replaces the set of limits at once: a decision reads the set
// once, so it is decided entirely by the old set or entirely by the new.
// Reload is Update for a service whose requests read the configuration
// and then decide: the old and the new limits both decide while the new
// configuration is published.
// A limit's state is kept by its name, and hotlimitd's config changes a
// limit's name when its policy changes: a name the new set keeps keeps
// its limiter (its in-process counts; in Lease mode the leases it holds),
// a new name starts fresh, and a dropped name's limiter is closed once no
// decision uses it (in Lease mode its leases go back to Redis where the
// policy allows; units that cannot go back stay debited, never spent
// twice). In Redis mode the state is in Redis, keyed by name, so it is
// kept whatever this process does.
package backend
