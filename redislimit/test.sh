#!/usr/bin/env bash
# The tests of the redislimit module (its lease mode included) and of
# internal/redistest under the race detector, against real servers: a
# private redis-server and a private 3-master Redis Cluster on free
# loopback ports, torn down on exit (internal/redistest/servers.sh, which
# installs redis-server with apt-get when it is absent; scripts/test
# starts them once for every module instead).
# gofmt, vet, staticcheck and bench/redisbench's smoke run are
# scripts/check's.
# Usage: bash redislimit/test.sh
set -euo pipefail
cd "$(dirname "$0")"

# Starts the servers (stopped on exit) and exports their addresses, unless
# the caller did.
source ../internal/redistest/servers.sh

echo "== redislimit: go test -race (server $HOTLIMIT_REDIS_ADDR, cluster $HOTLIMIT_REDIS_CLUSTER)"
go test -race -count=1 ./... ../internal/redistest/...
