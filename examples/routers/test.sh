#!/usr/bin/env bash
# Vet and test the router examples (chi, gin, echo behind httplimit), a
# nested module so that no user of hotlimit inherits the routers. Each
# example's test serves its router with httptest on a manual clock: nothing
# is concurrent, so no -race.
set -euo pipefail
cd "$(dirname "$0")"
unformatted=$(gofmt -l .)
if [[ -n $unformatted ]]; then
	echo "gofmt needed:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...
go test -count=1 ./...
