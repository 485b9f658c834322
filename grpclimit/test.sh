#!/usr/bin/env bash
# The grpclimit module's tests (gRPC interceptors), which run real gRPC
# servers on loopback TCP: under the race detector, then the allocation
# counts, which the race detector makes meaningless. gofmt, vet and
# staticcheck are scripts/check's.
set -euo pipefail
cd "$(dirname "$0")"

go test -race -count=1 ./...
go test -count=1 -run 'Allocs$' ./...
