#!/usr/bin/env bash
# Runs every fuzz target of the root module's fuzzed packages for a fixed
# time each.
#
#   bash fuzz/run.sh [fuzztime] [extra go test flags...]
#
# fuzztime defaults to 10s (any -fuzztime value: 30s, 2m, 5000x). Extra
# flags go to every go test call, e.g. -parallel=1 on a busy machine.
# New failing inputs are written to <package>/testdata/fuzz/<Target>/ by
# go test.
#
# Minimizing a new interesting input may take up to -fuzzminimizetime
# (60s by default), during which no new inputs run; the targets' inputs are
# slow to minimize, so it is capped here at FUZZ_MINIMIZE (default 2s).
# A failing input is still minimized within that budget.
#
# Go 1.26's fuzzing coordinator can report "context deadline exceeded" when
# -fuzztime expires while a worker is mid-input on a loaded machine
# (golang/go#75804, fixed in Go 1.27). Such a run wrote no failing input
# and found nothing; it is retried, at most twice. Any other failure, and
# any run that wrote a failing input, fails.
set -euo pipefail

fuzztime="${1:-10s}"
shift || true
cd "$(dirname "$0")/.."

status=0
for pkg in . ./fuzz ./httplimit ./httpretry; do
	targets=$(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
	if [ -z "$targets" ]; then
		echo "run.sh: no fuzz targets found in $pkg" >&2
		exit 1
	fi
	for t in $targets; do
		for attempt in 1 2 3; do
			echo "=== $pkg $t for $fuzztime"
			log=$(mktemp)
			if go test "$pkg" -run='^$' -fuzz="^${t}\$" -fuzztime="$fuzztime" \
				-fuzzminimizetime="${FUZZ_MINIMIZE:-2s}" "$@" 2>&1 | tee "$log"; then
				rm -f "$log"
				break
			fi
			if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log" && [ "$attempt" -lt 3 ]; then
				echo "run.sh: $t: the fuzzing engine's deadline race (golang/go#75804), nothing found; running it again" >&2
				rm -f "$log"
				continue
			fi
			rm -f "$log"
			status=1
			break
		done
	done
done
exit $status
