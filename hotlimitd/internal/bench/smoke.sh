#!/usr/bin/env bash
# CI's check of the comparison harness (a stage of scripts/check), about
# 45 s with warm caches (a minute more when the race detector builds
# gubernator's dependencies first): its tests under the race detector (the
# load generator against gubernator and a stand-in RLS server, and
# TestDifferentialRatelimit, hotlimitd against envoyproxy/ratelimit on
# generated configurations and requests, required here), and rlsbench
# once per system and backend with 100 requests, a smoke run whose
# figures mean nothing (hotlimitd/RESULTS.md has the measurements; run.sh
# makes them), envoyproxy/ratelimit's among them (ratelimit.sh installs
# it from the module proxy the first time, about 30 s). Starts a private
# redis-server for the Redis and lease
# backends (internal/redistest/servers.sh) unless the caller did. gofmt,
# vet and staticcheck are scripts/check's. This directory is a workspace of
# its own (go.work), outside the root's, so that nothing else builds
# gubernator.
set -euo pipefail
cd "$(dirname "$0")"

# shellcheck source=../../../internal/redistest/servers.sh
source ../../../internal/redistest/servers.sh
# shellcheck source=ratelimit.sh
source ./ratelimit.sh
HOTLIMITD_DIFFERENTIAL=required go test -race -count=1 ./...

bin=$redis_dir/rlsbench
go build -o "$bin" ./cmd/rlsbench
for s in "-system hotlimitd -backend local" "-system hotlimitd -backend redis" "-system hotlimitd -backend lease" \
	"-system gubernator -behavior no_batching" "-system gubernator -behavior global" \
	"-system hotlimitd -backend redis -replicas 2" "-system gubernator -behavior batching -replicas 2" \
	"-system ratelimit -ratelimit-bin $RATELIMIT_BIN -alg window" "-system ratelimit -ratelimit-bin $RATELIMIT_BIN -alg window -ratelimit-stats off -over-keys 2" \
	"-system hotlimitd -backend redis -local-denials 10 -over-keys 2 -pause-redis 10ms"; do
	# shellcheck disable=SC2086 # $s is flags, split on purpose
	out=$("$bin" $s -desc 3 -requests 100 -duration 0 -warmup 0 -callers 4 -conns 2 -redis "$HOTLIMIT_REDIS_ADDR")
	grep -q '^BenchmarkRLS/.*	100	' <<<"$out" || { echo "rlsbench $s printed no result line of 100 requests:"; echo "$out"; exit 1; }
done
echo "ok: harness tests pass, rlsbench answered 100 requests on each system"
