#!/usr/bin/env bash
# Format, vet and race-enabled tests of the grpclimit nested module (gRPC
# interceptors). The tests run real gRPC servers on loopback TCP.
set -euo pipefail
cd "$(dirname "$0")"

unformatted=$(gofmt -l .)
if [[ -n "$unformatted" ]]; then
	echo "not gofmt'ed:"; echo "$unformatted"; exit 1
fi
go vet ./...
GOARCH=386 go vet ./...
go test -race -count=1 ./...
# Allocation counts, which the race detector makes meaningless.
go test -count=1 -run 'Allocs$' ./...
