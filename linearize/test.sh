#!/usr/bin/env bash
# Vet and the short linearizability check of the linearize nested module
# (porcupine against internal/refmodel; see doc.go for a long run).
set -euo pipefail
cd "$(dirname "$0")"

unformatted=$(gofmt -l .)
if [[ -n "$unformatted" ]]; then
	echo "not gofmt'ed:"; echo "$unformatted"; exit 1
fi
go vet ./...
go test -race -count=1 ./...
