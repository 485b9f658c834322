#!/usr/bin/env bash
# The short linearizability check of the linearize module (porcupine
# against internal/refmodel, under the race detector; see doc.go for a long
# run). gofmt, vet and staticcheck are scripts/check's.
set -euo pipefail
cd "$(dirname "$0")"

go test -race -count=1 ./...
