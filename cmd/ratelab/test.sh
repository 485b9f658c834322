#!/usr/bin/env bash
# ratelab's tests (a nested module: run from anywhere). Nothing here is
# concurrent, so they run without -race; they take a few seconds. gofmt,
# vet, staticcheck, the golang.org/x/image version and the README's command
# are scripts/check's.
set -euo pipefail
cd "$(dirname "$0")"

go test -count=1 ./...
# 32-bit int: the shapes' ordering and the golden table hold there too.
GOARCH=386 go test -count=1 -run 'TestShapesAreOrdered|TestGolden$' ./...
