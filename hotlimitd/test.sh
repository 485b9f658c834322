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
go test -race -count=1 ./...
