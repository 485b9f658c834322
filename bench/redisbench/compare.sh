#!/usr/bin/env bash
# Runs this module's benchmarks in interleaved rounds (-count 1 each, so a
# shared machine's changing load falls on every column alike) and compares
# redislimit with redis_rate using benchstat. With BEFORE=<commit>, each
# round also runs the same benchmarks built against redislimit as of that
# commit (extracted read-only with git show), as a third column.
#
# Usage, with a private redis-server serving nothing else (script-µs/op
# reads its INFO commandstats):
#
#	HOTLIMIT_REDIS_ADDR=127.0.0.1:PORT [BEFORE=80dd5ef] [ROUNDS=6] bash compare.sh raw.txt
set -euo pipefail
out=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: "${HOTLIMIT_REDIS_ADDR:?set HOTLIMIT_REDIS_ADDR}"

(cd "$here" && go test -c -o "$tmp/new.test" .)
if [[ -n "${BEFORE:-}" ]]; then
	mkdir -p "$tmp/old/redislimit" "$tmp/old/bench"
	for f in $(git -C "$root" ls-tree --name-only "$BEFORE" redislimit/); do
		git -C "$root" show "$BEFORE:$f" >"$tmp/old/$f"
	done
	cp -r "$here" "$tmp/old/bench/redisbench"
	sed -i "s#=> \.\./\$#=> $root#" "$tmp/old/redislimit/go.mod"
	sed -i "s#=> \.\./\.\./redislimit\$#=> $tmp/old/redislimit#; s#=> \.\./\.\./\$#=> $root#" "$tmp/old/bench/redisbench/go.mod"
	(cd "$tmp/old/bench/redisbench" && go test -c -o "$tmp/old.test" .)
fi

{
	echo "goos: $(go env GOOS)"
	echo "goarch: $(go env GOARCH)"
	echo "pkg: github.com/hotlimit/hotlimit/bench/redisbench"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
} >"$out"
for _ in $(seq "${ROUNDS:-6}"); do
	"$tmp/new.test" -test.run '^$' -test.bench . -test.benchtime "${BENCHTIME:-1s}" -test.count 1 | grep '^Benchmark' >>"$out"
	if [[ -n "${BEFORE:-}" ]]; then
		"$tmp/old.test" -test.run '^$' -test.bench /redislimit -test.benchtime "${BENCHTIME:-1s}" -test.count 1 | grep '^Benchmark' |
			sed "s#/redislimit#/redislimit@$BEFORE#" >>"$out"
	fi
done

# One file per column, the limiter's name taken out of the benchmark's.
column() { # regexp, sed script
	{ grep -v '^Benchmark' "$out"; grep -E "$1" "$out" | grep -v twotier | sed -E "$2"; } >"$tmp/$3.txt"
}
column '^Benchmark[A-Za-z]+/redislimit[/-]' 's#/redislimit##' redislimit
column '^Benchmark(Allowed|Abusive)/redis_rate/|^BenchmarkLayers/redis_rate-3calls' 's#/redis_rate-3calls##; s#/redis_rate##' redis_rate
cols=("redislimit=$tmp/redislimit.txt" "redis_rate=$tmp/redis_rate.txt")
if [[ -n "${BEFORE:-}" ]]; then
	column "^Benchmark[A-Za-z]+/redislimit@$BEFORE[/-]" "s#/redislimit@$BEFORE##" before
	cols+=("redislimit@$BEFORE=$tmp/before.txt")
fi
benchstat "${cols[@]}"
