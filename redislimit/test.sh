#!/usr/bin/env bash
# Tests of the redislimit module against real servers: a private
# redis-server and a private 3-master Redis Cluster, both on free loopback
# ports and torn down on exit. Runs gofmt, vet, go test -race, and one
# iteration of every benchmark in bench/redisbench. Installs redis-server
# (apt-get) when it is absent.
# Usage: bash redislimit/test.sh
set -euo pipefail
cd "$(dirname "$0")"

# Starts the servers (stopped on exit) and exports their addresses.
source redistest/servers.sh

echo "== redislimit: gofmt, vet"
unformatted=$(gofmt -l . ../bench/redisbench)
if [[ -n "$unformatted" ]]; then
	echo "not gofmt'ed:"; echo "$unformatted"; exit 1
fi
go vet ./...

echo "== redislimit: go test -race (server $HOTLIMIT_REDIS_ADDR, cluster $HOTLIMIT_REDIS_CLUSTER)"
go test -race -count=1 ./...

echo "== bench/redisbench: vet, every benchmark once (output shown only on failure)"
(
	cd ../bench/redisbench
	go vet ./...
	# One iteration is a smoke test, not a measurement: its figures would
	# read like results, so they are shown only when it fails.
	log="$redis_dir/redisbench.log"
	go test -count=1 -run . -bench . -benchtime 1x ./... >"$log" 2>&1 || { cat "$log"; exit 1; }
	echo "ok (bench/redisbench/RESULTS.md has the measurements)"
)
