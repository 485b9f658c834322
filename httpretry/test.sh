#!/usr/bin/env bash
# httpretry's checks: gofmt, vet, the race-enabled tests, and a short run
# of each fuzz target (FUZZTIME, 50000x by default: a count of inputs, not a
# duration, since Go 1.26's fuzzing coordinator can fail a duration-bound
# run with "context deadline exceeded" on a loaded machine, golang/go#75804).
# Usage: bash httpretry/test.sh   (from any directory)
set -euo pipefail
cd "$(dirname "$0")"

echo "== httpretry: gofmt"
unformatted=$(gofmt -l .)
if [[ -n "$unformatted" ]]; then
	echo "not gofmt'ed:"; echo "$unformatted"; exit 1
fi

echo "== httpretry: go vet"
go vet .
GOARCH=386 go vet .

echo "== httpretry: go test -race"
go test -race -count=1 .

for target in FuzzRetryAfter FuzzRateLimitField; do
	echo "== httpretry: $target for ${FUZZTIME:-50000x}"
	go test -run='^$' -fuzz="^${target}\$" -fuzztime="${FUZZTIME:-50000x}" -fuzzminimizetime=2s .
done
