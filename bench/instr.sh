#!/usr/bin/env bash
# Instructions per operation of benchmarks, counted by callgrind, at one
# or more commits: figures that hold on a loaded machine, where times do
# not.
#
#   bench/instr.sh DIR 'BenchmarkX/sub$' [N] COMMIT...
#
# builds DIR's test binary (cgo off: callgrind does not follow cgo's
# threads) at each commit in a temporary worktree, runs the pattern's
# benchmarks once with -test.benchtime 1x and once with (N+1)x (default
# N 100000) under callgrind, with asynchronous preemption off (its
# signals stop callgrind), and prints, per commit and benchmark, the
# difference over N: the instructions of one operation, setup excluded.
# Give a pattern that matches one benchmark.
set -euo pipefail
dir=$1 pat=$2 n=${3:-100000}
shift 3
root=$(git rev-parse --show-toplevel)
out=$(mktemp -d)
for c in "$@"; do
	wt=$(mktemp -d)
	git -C "$root" worktree add -q --detach "$wt" "$c"
	(cd "$wt/$dir" && CGO_ENABLED=0 go test -c -o "$out/$c.test" .)
	git -C "$root" worktree remove --force "$wt"
	ir() {
		GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
			"$out/$c.test" -test.run '^$' -test.bench "$pat" -test.benchtime "$1" -test.cpu 1 2>&1 >/dev/null |
			sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
	}
	a=$(ir 1x)
	b=$(ir "$((n + 1))x")
	echo "$c $dir $pat $(((b - a) / n)) instructions/op"
done
rm -rf "$out"
