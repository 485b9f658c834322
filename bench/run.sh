#!/usr/bin/env bash
# Full comparison: every workload, every implementation, -count 5, then
# benchstat with one column per implementation beside the baseline
# (xrate-map-mutex, the first column).
#
# Environment:
#   BENCHTIME            -benchtime of the run (default 1s)
#   COUNT                -count of the run (default 5)
#   BENCH                -bench regexp (default ".", everything)
#   HOTLIMIT_BENCH_KEYS  keys of the many-keys workloads (default 1000000)
#   OUT                  raw output file (default out.txt); the benchstat
#                        table goes to ${OUT%.txt}.benchstat.txt
set -euo pipefail
cd "$(dirname "$0")"

BENCHTIME=${BENCHTIME:-1s}
COUNT=${COUNT:-5}
BENCH=${BENCH:-.}
OUT=${OUT:-out.txt}

BENCHSTAT=${BENCHSTAT:-}
if [[ -z "$BENCHSTAT" ]]; then
	if command -v benchstat >/dev/null 2>&1; then
		BENCHSTAT=benchstat
	else
		BENCHSTAT="$(go env GOPATH)/bin/benchstat"
	fi
fi
if [[ ! -x "$BENCHSTAT" ]] && ! command -v "$BENCHSTAT" >/dev/null 2>&1; then
	echo "installing benchstat" >&2
	go install golang.org/x/perf/cmd/benchstat@latest
	BENCHSTAT="$(go env GOPATH)/bin/benchstat"
fi

{
	echo "# go test -run '^\$' -bench '$BENCH' -count $COUNT -benchtime $BENCHTIME -timeout 0 ./..."
	echo "# HOTLIMIT_BENCH_KEYS=${HOTLIMIT_BENCH_KEYS:-1000000}"
	echo "# $(go version)"
	echo "# $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //') x $(nproc 2>/dev/null || echo '?')"
} >"$OUT"

go test -run '^$' -bench "$BENCH" -count "$COUNT" -benchtime "$BENCHTIME" -timeout 0 ./... | tee -a "$OUT"

# One column per implementation, the baseline first; the floors (which
# have no impl) in a table of their own.
{
	"$BENCHSTAT" -filter '-.name:Floor' -col /impl "$OUT"
	echo
	"$BENCHSTAT" -filter '.name:Floor' "$OUT"
} | tee "${OUT%.txt}.benchstat.txt"
