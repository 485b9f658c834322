// Package redisbench measures redislimit: each policy's decision beside a
// PING on the same client (the ratio is the cost of a decision over the
// cheapest round trip), and against github.com/go-redis/redis_rate on the
// same Redis server: round trips per decision, ns/op serially and in
// parallel, decisions per second and the servers' CPU per decision at 64
// callers on one server and on a 3-master Redis Cluster, redis-server's CPU
// per decision of hotlimitd's fixed-window call (BenchmarkWindows: 1 and 3
// layers, 32 and 64 callers) and its instructions per decision under
// callgrind (BenchmarkBatchReplay, callgrind.sh), the two-tier mode's speed-up on a key that is mostly denied,
// and the lease mode (redislimit.WithLeases) beside the in-process and the
// synchronous limiters, with its round trips at a steady rate. It is a nested module so that no user of hotlimit inherits
// these dependencies. Results and the commands are in RESULTS.md. A start,
// against a redis-server of your own (redislimit/test.sh runs every
// benchmark once against a private one):
//
//	cd bench/redisbench
//	HOTLIMIT_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench . -count 5
package redisbench
