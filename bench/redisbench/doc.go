// Package redisbench compares redislimit with github.com/go-redis/redis_rate
// on the same Redis server: round trips per decision, ns/op serially and
// in parallel, and the two-tier mode's speed-up on a key that is mostly
// denied. It is a nested module so that no user of hotlimit inherits
// these dependencies. Results and the command are in RESULTS.md.
package redisbench
