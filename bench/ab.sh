#!/usr/bin/env bash
# A/B of the root package's benchmarks between two commits, interleaved
# so that the machine's drift hits both sides alike:
#
#   bench/ab.sh OLD NEW 'AllowOneKey/TokenBucket' [rounds] [benchtime]
#
# builds the root package's test binary at each commit (in temporary
# worktrees), runs them alternately `rounds` times (default 8) and prints
# benchstat OLD vs NEW. Raw output is left in $AB_OUT (default /tmp/ab).
# AB_DIR names another package's directory to build instead, such as
# httplimit or grpclimit (a nested module builds in its workspace).
set -euo pipefail
old=$1 new=$2 pat=$3 rounds=${4:-8} bt=${5:-300ms}
out=${AB_OUT:-/tmp/ab}
dir=${AB_DIR:-.}
root=$(git rev-parse --show-toplevel)
mkdir -p "$out"
for c in "$old" "$new"; do
	wt=$(mktemp -d)
	git -C "$root" worktree add -q --detach "$wt" "$c"
	(cd "$wt/$dir" && go test -c -o "$out/$c.test" .)
	git -C "$root" worktree remove --force "$wt"
done
: >"$out/$old.txt"
: >"$out/$new.txt"
for _ in $(seq "$rounds"); do
	for c in "$old" "$new"; do
		"$out/$c.test" -test.run '^$' -test.bench "$pat" -test.benchtime "$bt" | grep '^Benchmark' >>"$out/$c.txt"
	done
done
go run golang.org/x/perf/cmd/benchstat@latest "$out/$old.txt" "$out/$new.txt"
