#!/usr/bin/env bash
# Reproduces hotlimitd/RESULTS.md's tables. Two suites (SUITE):
#
#   ratelimit (the default): hotlimitd on Redis beside envoyproxy/ratelimit
#     (the pinned version ratelimit.sh installs) and gubernator v2.13.0
#     (batching, its best exact mode), one replica each, on the same
#     redis-server, fixed windows of the same limits, under the same gRPC
#     load from rlsbench. Rows: 1 and 3 descriptors a request, 32 and 64
#     callers; 1 descriptor with half the keys over the limit (-over-keys
#     500 of 1,000), where hotlimitd also runs with its denial cache; and
#     32 callers with redis-server paused for 0.3 s (SIGSTOP, SIGCONT) a
#     third into the measured part. envoyproxy/ratelimit runs with its
#     local cache and pipeline window, with its stats to Prometheus and
#     with its stats off: its better one is the row's.
#   gubernator: hotlimitd (in process, Redis, leased) beside gubernator
#     (no_batching, batching, global), for each algorithm (ALGS) and
#     descriptor count (DESCS); REPLICAS replicas of each.
#
# RUNS rounds, every configuration once a round in alternation; then
# benchstat (medians and 95% intervals of the rounds).
#
# Usage: bash hotlimitd/internal/bench/run.sh [RUNS]   (RUNS=5)
# Environment:
#   SUITE          ratelimit (default) or gubernator
#   OUT            raw output (default hotlimitd/internal/bench/raw-DATE-SUITE.txt); the
#                  benchstat table goes to ${OUT%.txt}.benchstat.txt
#   RLSBENCH_FLAGS more rlsbench flags for every run (default: its own,
#                  -callers 32 -conns 4 -keys 1000 -duration 5s -warmup 1s
#                  -limit 1000 -unit second)
#   ALGS, DESCS    gubernator suite: the algorithms and descriptor counts
#                  (default "bucket window", "1 3")
#   REPLICAS       gubernator suite: replicas of each service (default 1);
#                  above 1, gubernator nodes that forward to each key's
#                  owner, or hotlimitd Servers sharing one Redis (no local
#                  backend), and OUT's default ends in -replicasN.txt
#   RATELIMIT_BIN  envoyproxy/ratelimit's service_cmd (default: ratelimit.sh's)
# Starts a private redis-server on a free loopback port (and a private
# Cluster, unused) with internal/redistest/servers.sh; kills it on exit.
set -euo pipefail
cd "$(dirname "$0")"
RUNS=${1:-5}
SUITE=${SUITE:-ratelimit}
REPLICAS=${REPLICAS:-1}
suffix=-$SUITE
[[ $REPLICAS -gt 1 ]] && suffix=$suffix-replicas$REPLICAS
OUT=${OUT:-$PWD/raw-$(date -u +%F)$suffix.txt}
ALGS=${ALGS:-bucket window}
DESCS=${DESCS:-1 3}
read -r -a extra <<<"${RLSBENCH_FLAGS:-}"

# shellcheck source=../../../internal/redistest/servers.sh
source ../../../internal/redistest/servers.sh
bin=$redis_dir/rlsbench
go build -o "$bin" ./cmd/rlsbench

BENCHSTAT=${BENCHSTAT:-$(command -v benchstat || echo "$(go env GOPATH)/bin/benchstat")}
if [[ ! -x $BENCHSTAT ]]; then
	go install golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
fi

# configs holds one line per run of a round: rlsbench's flags.
configs=()
case $SUITE in
ratelimit)
	# shellcheck source=ratelimit.sh
	source ./ratelimit.sh
	hot="-system hotlimitd -backend redis"
	rl="-system ratelimit -ratelimit-bin $RATELIMIT_BIN"
	for row in "-desc 1 -callers 32" "-desc 3 -callers 32" "-desc 1 -callers 64" "-desc 3 -callers 64"; do
		configs+=("$hot $row" "$rl -ratelimit-stats prometheus $row" "-system gubernator -behavior batching $row" "$rl -ratelimit-stats off $row")
	done
	row="-desc 1 -callers 32 -over-keys 500"
	configs+=("$hot $row" "$rl -ratelimit-stats prometheus $row" "$hot -local-denials 100000 $row" "$rl -ratelimit-stats off $row")
	row="-desc 1 -callers 32 -pause-redis 300ms"
	configs+=("$hot $row" "$rl -ratelimit-stats prometheus $row" "$rl -ratelimit-stats off $row")
	extra+=(-alg window)
	;;
gubernator)
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
	for alg in $ALGS; do
		for desc in $DESCS; do
			for s in "${systems[@]}"; do
				configs+=("$s -alg $alg -desc $desc")
			done
		done
	done
	;;
*)
	echo "run.sh: unknown SUITE=$SUITE (want ratelimit or gubernator)" >&2
	exit 2
	;;
esac
{
	echo "# bash hotlimitd/internal/bench/run.sh $RUNS  (SUITE=$SUITE RLSBENCH_FLAGS='${RLSBENCH_FLAGS:-}' ALGS='$ALGS' DESCS='$DESCS' REPLICAS=$REPLICAS)"
	echo "# $(go version); redis-server $(redis-server --version | sed -n 's/.* v=\([0-9.]*\).*/\1/p')"
	[[ $SUITE == ratelimit ]] && echo "# envoyproxy/ratelimit $RATELIMIT_VERSION"
	echo "goos: $(go env GOOS)"
	echo "goarch: $(go env GOARCH)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //') x $(nproc)"
} >"$OUT"
for run in $(seq "$RUNS"); do
	echo "# round $run of $RUNS" | tee -a "$OUT"
	for c in "${configs[@]}"; do
		# shellcheck disable=SC2086 # $c is flags, split on purpose
		# A failed run (more than -max-errors failed calls) is
		# recorded as such; the others go on.
		# Its other lines (logs, errors) become comments: benchstat
		# would read a "key: value" line as configuration.
		"$bin" $c -redis "$HOTLIMIT_REDIS_ADDR" "${extra[@]}" 2>&1 |
			sed -E '/^(Benchmark|#)/!s/^/# /' | tee -a "$OUT" ||
			echo "# FAILED: rlsbench $c" | tee -a "$OUT"
	done
done
"$BENCHSTAT" "$OUT" | tee "${OUT%.txt}.benchstat.txt"
