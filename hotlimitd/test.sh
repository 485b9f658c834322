#!/usr/bin/env bash
# Format, vet and race-enabled tests of the hotlimitd nested module (the
# Envoy rate limit service). The tests run gRPC servers on loopback TCP.
set -euo pipefail
cd "$(dirname "$0")"

unformatted=$(gofmt -l .)
if [[ -n "$unformatted" ]]; then
	echo "not gofmt'ed:"; echo "$unformatted"; exit 1
fi
go vet ./...
GOARCH=386 go vet ./...
# The backend's tests run two replicas on a private redis-server and Redis
# Cluster: the servers redislimit/test.sh starts (stopped on exit); and on
# the TLS, AUTH and Sentinel servers redis-secure.sh starts beside them.
if [[ -z ${HOTLIMIT_REDIS_ADDR:-} || -z ${HOTLIMIT_REDIS_CLUSTER:-} || -z ${HOTLIMIT_REDIS_SENTINEL_ADDR:-} ]]; then
	source ../redislimit/redistest/servers.sh
	source ./redis-secure.sh
fi
go test -race -count=1 ./...
