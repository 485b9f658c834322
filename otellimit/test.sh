#!/usr/bin/env bash
# Vet and tests of the otellimit nested module (OpenTelemetry metrics and
# traces), and one iteration of each of its benchmarks.
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
go test -count=1 -run '^$' -bench . -benchtime 1x ./... >/dev/null
