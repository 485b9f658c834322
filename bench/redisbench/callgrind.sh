#!/usr/bin/env bash
# redis-server's instructions per decision of BenchmarkBatchReplay's
# batches (see its doc), which a loaded machine does not change: for each
# of its sub-benchmarks, a redis-server under valgrind's callgrind serves
# 50 replays of the batch and, anew, 250; the difference of the two
# totals over 200 batches of 6 decisions is what one decision costs the
# server (start-up and loading the scripts cancel).
#
# Usage: bash callgrind.sh [TEST_BINARY]
#   TEST_BINARY  this package's test binary (default: built here); give
#                one built at another commit to compare
# Environment: HOTLIMIT_REDIS_ADDR, the redis-server the batches are
# taken on (redislimit's calls to it make the batch to replay). Needs
# valgrind and redis-server.
set -euo pipefail
cd "$(dirname "$0")"
: "${HOTLIMIT_REDIS_ADDR:?the redis-server to take the batches on}"
bin=${1:-}
if [[ -z $bin ]]; then
	bin=$(mktemp -d)/redisbench.test
	go test -c -o "$bin" .
fi
out=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
total() { # total N SUB: callgrind's total of a server that replayed SUB's batch N times
	valgrind --tool=callgrind --callgrind-out-file="$out/cg.$1" redis-server --port "$port" --save '' --appendonly no >"$out/vg.$1.log" 2>&1 &
	local vg=$!
	for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
	HOTLIMIT_REPLAY_ADDR=127.0.0.1:$port "$bin" -test.run '^$' -test.bench "BatchReplay/$2\$" -test.benchtime "${1}x" >/dev/null
	redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
	wait "$vg" || true
	callgrind_annotate "$out/cg.$1" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}
for sub in layers=1/decisions=6 layers=3/decisions=6; do
	a=$(total 50 "$sub")
	b=$(total 250 "$sub")
	echo "$sub: $(((b - a) / 200 / 6)) instructions a decision (50 replays: $a, 250: $b)"
done
rm -rf "$out"
