# Sourced (bash) by scripts/test and scripts/check: runs named stages one
# after another, each reported with its elapsed time, the CPU time it and
# its children used (user + system, which other work on the machine
# inflates far less than the elapsed time) and the 1-minute load average;
# the first failing stage stops the run; stages_summary prints every
# stage's times at the end. Expects set -euo pipefail and the repository
# root as the working directory.
#
#   stage NAME COMMAND...      runs COMMAND in a subshell with set -e, from
#                              the repository root
#   stage -q NAME COMMAND...   the same, its output kept in a file and shown
#                              only if it fails (for output that reads like
#                              results but is not, such as one-iteration
#                              benchmarks)
#   stage_begin NAME / stage_end
#                              a stage run in this shell, for what must
#                              outlive it (servers that later stages use):
#                              a failure in between exits the script, with
#                              no summary line

root=$PWD

now() { echo "${EPOCHREALTIME:-$(date +%s)}"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fs", b - a }'; }
# The 1-minute load average, printed beside each stage's time: on a shared
# machine a time means little without it.
load() { cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?'; }

stages_summary_lines=()
stages_start=$(now)

stage_record() { # NAME T0 CPU
	local took
	took=$(secs "$2" "$(now)")
	echo "-- $1: ok, $took, cpu $3 (load $(load))"
	stages_summary_lines+=("$(printf '%8s  cpu %8s  load %5s  %s' "$took" "$3" "$(load)" "$1")")
}

# stage_run TIMEFILE COMMAND...: COMMAND in a subshell with set -e, from the
# repository root; its user and system CPU seconds (its children's
# included) go to TIMEFILE, its output where the caller's goes.
stage_run() {
	local tf=$1 TIMEFORMAT='%U %S'
	shift
	# The redirection to 3 is inside what is timed: time writes its report
	# where the timed command's redirections send standard error.
	{ time { (set -e; cd "$root"; "$@") 2>&3; }; } 3>&2 2>"$tf"
}

stage() {
	local quiet=
	if [[ $1 == -q ]]; then
		quiet=1
		shift
	fi
	local name=$1
	shift
	echo "== $name"
	local t0 rc log tf cpu
	t0=$(now)
	tf=$(mktemp)
	set +e
	if [[ -n $quiet ]]; then
		log=$(mktemp)
		stage_run "$tf" "$@" >"$log" 2>&1
		rc=$?
		if [[ $rc -ne 0 ]]; then
			cat "$log"
		fi
		rm -f "$log"
	else
		stage_run "$tf" "$@"
		rc=$?
	fi
	set -e
	cpu=$(awk '{ printf "%.1fs", $1 + $2 }' "$tf")
	rm -f "$tf"
	if [[ $rc -ne 0 ]]; then
		echo "-- $name: FAILED (exit $rc) after $(secs "$t0" "$(now)"), cpu $cpu (load $(load))"
		exit "$rc"
	fi
	stage_record "$name" "$t0" "$cpu"
}

stage_begin() {
	stage_here_name=$1
	echo "== $1"
	stage_here_t0=$(now)
}
stage_end() { stage_record "$stage_here_name" "$stage_here_t0" -; }

stages_summary() { # TITLE
	echo "== $1"
	local line tf cpu
	for line in "${stages_summary_lines[@]}"; do
		echo "$line"
	done
	# The times builtin, run in this shell (a subshell would count only its
	# own): this script's CPU time and its children's.
	tf=$(mktemp)
	times >"$tf"
	cpu=$(awk 'function s(t) { split(t, a, "m"); return a[1] * 60 + a[2] }
		{ total += s($1) + s($2) } END { printf "%.1fs", total }' "$tf")
	rm -f "$tf"
	printf '%8s  cpu %8s  load %5s  total\n' "$(secs "$stages_start" "$(now)")" "$cpu" "$(load)"
}
