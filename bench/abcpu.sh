#!/usr/bin/env bash
# A/B of one root-package benchmark in CPU time rather than wall time, for
# a loaded machine where other processes preempt the benchmark and
# ns/op from `go test -bench` varies by ±50%:
#
#   bench/abcpu.sh OLD NEW 'LayersAndFriends/^AllowLayers=3$' N [rounds]
#
# The pattern must select one benchmark (add /^$ to leave out a
# sub-benchmark's children). It builds the root package's test binary at
# each commit (in temporary worktrees; $AB_EXTRA, if set, is a _test.go
# file copied into both first), then, alternately `rounds` times (default
# 10), measures each binary's task-clock (perf stat) for N iterations
# (-test.benchtime Nx) and for 1, and reports (T(N) − T(1)) / N as ns/op:
# the CPU time per operation, setup and process start subtracted. benchstat
# compares the two sides; raw lines are left in $AB_OUT (default /tmp/abcpu).
set -euo pipefail
old=$1 new=$2 pat=$3 n=$4 rounds=${5:-10}
out=${AB_OUT:-/tmp/abcpu}
root=$(git rev-parse --show-toplevel)
mkdir -p "$out"
for c in "$old" "$new"; do
	wt=$(mktemp -d)
	git -C "$root" worktree add -q --detach "$wt" "$c"
	if [[ -n ${AB_EXTRA:-} ]]; then cp "$AB_EXTRA" "$wt/"; fi
	(cd "$wt" && go test -c -o "$out/$c.test" .)
	git -C "$root" worktree remove --force "$wt"
done
cpu() { # task-clock in ms of one run of binary $1 with -test.benchtime $2
	perf stat -e task-clock -x, "$1" -test.run '^$' -test.bench "$pat" -test.benchtime "$2" 2>&1 >/dev/null |
		awk -F, '/task-clock/ { print $1 }'
}
name=Benchmark$(echo "$pat" | tr -d '^$')
: >"$out/$old.txt"
: >"$out/$new.txt"
for _ in $(seq "$rounds"); do
	for c in "$old" "$new"; do
		t1=$(cpu "$out/$c.test" 1x)
		tn=$(cpu "$out/$c.test" "${n}x")
		awk -v name="$name" -v a="$tn" -v b="$t1" -v n="$n" 'BEGIN { printf "%s 1 %.2f ns/op\n", name, (a - b) * 1e6 / n }' >>"$out/$c.txt"
	done
done
go run golang.org/x/perf/cmd/benchstat@latest "$out/$old.txt" "$out/$new.txt"
