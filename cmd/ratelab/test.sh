#!/usr/bin/env bash
# Vet and test ratelab (a nested module: run from anywhere). Nothing here is
# concurrent, so the tests run without -race; they take a few seconds.
set -euo pipefail
cd "$(dirname "$0")"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "gofmt needed:" >&2
	echo "$unformatted" >&2
	exit 1
fi
# golang.org/x/image before v0.45.0 has vulnerabilities in packages the
# charts import (govulncheck found three in v0.30.0, fixed in v0.45.0).
image=$(go mod edit -print | awk '$1 == "golang.org/x/image" { print $2 }')
if [ "$(printf '%s\n' v0.45.0 "$image" | sort -V | head -1)" != v0.45.0 ]; then
	echo "golang.org/x/image is $image: want v0.45.0 or later" >&2
	exit 1
fi
go vet ./...
GOARCH=386 go vet ./...
go test -count=1 ./...
# 32-bit int: the shapes' ordering and the golden table hold there too.
GOARCH=386 go test -count=1 -run 'TestShapesAreOrdered|TestGolden$' ./...
# The README command, from the repository root, as a user runs it.
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
(cd ../.. && go -C cmd/ratelab run . -measure=false -shape boundary -out "$out" >/dev/null)
test -s "$out/ratelab-boundary.png"
test -s "$out/ratelab-overview.png"
