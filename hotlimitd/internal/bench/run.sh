#!/usr/bin/env bash
# Reproduces hotlimitd/RESULTS.md's table: hotlimitd (in process, Redis,
# leased) and gubernator v2.13.0 (no_batching, batching, global), each
# alone in its own process on loopback, under the same gRPC load from
# rlsbench, for each algorithm and 1 or 3 descriptors a request; RUNS
# rounds, every configuration once a round in alternation; then benchstat
# (medians and 95% intervals of the rounds).
#
# Usage: bash hotlimitd/internal/bench/run.sh [RUNS]   (RUNS=5)
# Environment:
#   OUT            raw output (default hotlimitd/internal/bench/raw-DATE.txt); the
#                  benchstat table goes to ${OUT%.txt}.benchstat.txt
#   RLSBENCH_FLAGS more rlsbench flags for every run (default: its own,
#                  -callers 32 -conns 4 -keys 1000 -duration 5s -warmup 1s
#                  -limit 1000 -unit second)
#   ALGS, DESCS    the algorithms and descriptor counts (default
#                  "bucket window", "1 3")
#   REPLICAS       replicas of each service (default 1); above 1,
#                  gubernator nodes that forward to each key's owner, or
#                  hotlimitd Servers sharing one Redis (no local backend),
#                  and OUT's default ends in -replicasN.txt
# Starts a private redis-server on a free loopback port (and a private
# Cluster, unused) with redislimit/redistest/servers.sh; kills it on exit.
set -euo pipefail
cd "$(dirname "$0")"
RUNS=${1:-5}
REPLICAS=${REPLICAS:-1}
suffix=
[[ $REPLICAS -gt 1 ]] && suffix=-replicas$REPLICAS
OUT=${OUT:-$PWD/raw-$(date -u +%F)$suffix.txt}
ALGS=${ALGS:-bucket window}
DESCS=${DESCS:-1 3}
read -r -a extra <<<"${RLSBENCH_FLAGS:-}"

# shellcheck source=../../../redislimit/redistest/servers.sh
source ../../../redislimit/redistest/servers.sh
bin=$redis_dir/rlsbench
go build -o "$bin" ./cmd/rlsbench

BENCHSTAT=${BENCHSTAT:-$(command -v benchstat || echo "$(go env GOPATH)/bin/benchstat")}
if [[ ! -x $BENCHSTAT ]]; then
	go install golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
fi

# Alternating: within a round, hotlimitd's and gubernator's runs take
# turns.
systems=(
	"-system hotlimitd -backend local"
	"-system gubernator -behavior no_batching"
	"-system hotlimitd -backend redis"
	"-system gubernator -behavior batching"
	"-system hotlimitd -backend lease"
	"-system gubernator -behavior global"
)
if [[ $REPLICAS -gt 1 ]]; then
	systems=("${systems[@]:1}") # local replicas would not share their limits
	extra+=(-replicas "$REPLICAS")
fi
{
	echo "# bash hotlimitd/internal/bench/run.sh $RUNS  (RLSBENCH_FLAGS='${RLSBENCH_FLAGS:-}' ALGS='$ALGS' DESCS='$DESCS' REPLICAS=$REPLICAS)"
	echo "# $(go version); redis-server $(redis-server --version | sed -n 's/.* v=\([0-9.]*\).*/\1/p')"
	echo "goos: $(go env GOOS)"
	echo "goarch: $(go env GOARCH)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //') x $(nproc)"
} >"$OUT"
for run in $(seq "$RUNS"); do
	echo "# round $run of $RUNS" | tee -a "$OUT"
	for alg in $ALGS; do
		for desc in $DESCS; do
			for s in "${systems[@]}"; do
				# shellcheck disable=SC2086 # $s is flags, split on purpose
				# A failed run (more than -max-errors failed calls) is
				# recorded as such; the others go on.
				# Its other lines (logs, errors) become comments: benchstat
				# would read a "key: value" line as configuration.
				"$bin" $s -alg "$alg" -desc "$desc" -redis "$HOTLIMIT_REDIS_ADDR" "${extra[@]}" 2>&1 |
					sed -E '/^(Benchmark|#)/!s/^/# /' | tee -a "$OUT" ||
					echo "# FAILED: rlsbench $s -alg $alg -desc $desc" | tee -a "$OUT"
			done
		done
	done
done
"$BENCHSTAT" "$OUT" | tee "${OUT%.txt}.benchstat.txt"
