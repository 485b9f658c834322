#!/usr/bin/env bash
# The promlimit module's tests (the Prometheus collector), under the race
# detector. httplimit and examples/server are in the root module, whose
# `go test -race ./...` runs them. gofmt, vet and staticcheck are
# scripts/check's.
set -euo pipefail
cd "$(dirname "$0")"

go test -race -count=1 ./...
