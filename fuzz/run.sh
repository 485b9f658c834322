#!/usr/bin/env bash
# Runs every fuzz target of ./fuzz for a fixed time each.
#
#   bash fuzz/run.sh [fuzztime] [extra go test flags...]
#
# fuzztime defaults to 10s (any -fuzztime value: 30s, 2m, 5000x). Extra
# flags go to every go test call, e.g. -parallel=1 on a busy machine.
# New failing inputs are written to fuzz/testdata/fuzz/<Target>/ by go test.
#
# Minimizing a new interesting input may take up to -fuzzminimizetime
# (60s by default), during which no new inputs run; the targets' inputs are
# slow to minimize, so it is capped here at FUZZ_MINIMIZE (default 2s).
# A failing input is still minimized within that budget.
set -euo pipefail

fuzztime="${1:-10s}"
shift || true
cd "$(dirname "$0")/.."

targets=$(go test -list '^Fuzz' ./fuzz | grep '^Fuzz' || true)
if [ -z "$targets" ]; then
	echo "run.sh: no fuzz targets found in ./fuzz" >&2
	exit 1
fi

status=0
for t in $targets; do
	echo "=== $t for $fuzztime"
	if ! go test ./fuzz -run='^$' -fuzz="^${t}\$" -fuzztime="$fuzztime" \
		-fuzzminimizetime="${FUZZ_MINIMIZE:-2s}" "$@"; then
		status=1
	fi
done
exit $status
