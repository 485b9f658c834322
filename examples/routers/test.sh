#!/usr/bin/env bash
# The router examples' tests (chi, gin, echo behind httplimit), a nested
# module so that no user of hotlimit inherits the routers. Each example's
# test serves its router with httptest on a manual clock: nothing is
# concurrent, so no -race. gofmt, vet and staticcheck are scripts/check's.
set -euo pipefail
cd "$(dirname "$0")"

go test -count=1 ./...
