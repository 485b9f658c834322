#!/usr/bin/env bash
# The otellimit module's tests (OpenTelemetry metrics and traces): under the
# race detector, then the allocation counts, which the race detector makes
# meaningless. gofmt, vet, staticcheck and one iteration of each benchmark
# are scripts/check's.
set -euo pipefail
cd "$(dirname "$0")"

go test -race -count=1 ./...
go test -count=1 -run 'Allocs$' ./...
