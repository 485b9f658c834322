#!/usr/bin/env bash
# Vet and tests of the promlimit nested module (the Prometheus collector).
# httplimit and examples/server are in the root module, whose
# `go test -race ./...` runs them.
set -euo pipefail
cd "$(dirname "$0")"

unformatted=$(gofmt -l .)
if [[ -n "$unformatted" ]]; then
	echo "not gofmt'ed:"; echo "$unformatted"; exit 1
fi
go vet ./...
go test -race -count=1 ./...
