# Sourced (bash) by the scripts that need real Redis servers (scripts/test
# and scripts/check once for every module, redislimit/test.sh and
# hotlimitd/test.sh when run alone, hotlimitd/internal/bench/smoke.sh): starts a
# private redis-server and a private 3-master Redis Cluster on free
# loopback ports, exports their addresses as HOTLIMIT_REDIS_ADDR and
# HOTLIMIT_REDIS_CLUSTER (the variables redistest reads), and kills them
# when the sourcing script exits (its EXIT trap). When both variables are
# set already (a parent script started the servers), it starts nothing and
# the servers are the parent's. $redis_dir is a scratch directory removed
# on exit in both cases. Installs redis-server (scripts/preflight redis)
# when it is absent. Expects set -euo pipefail.

redis_dir=$(mktemp -d)
redis_pids=()
redis_cleanup() {
	for p in "${redis_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${redis_pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$redis_dir"
}
trap redis_cleanup EXIT

# free_ports N: N loopback ports that are free, each with port+10000 free
# too (a cluster node's bus port), all below the ephemeral range
# (ip_local_port_range): a port from that range, free when chosen, can be
# taken by any outgoing connection on the machine before redis-server binds
# it. Without python3, N random ports in 20000-22767.
free_ports() {
	if ! command -v python3 >/dev/null; then
		local base=$((20000 + RANDOM % 2700))
		seq -s ' ' "$base" $((base + $1 - 1))
		return
	fi
	python3 - "$1" <<'EOF'
import random, socket, sys
n, out = int(sys.argv[1]), []
try:
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    lo = 32768
top = lo - 10001  # p + 10000 stays below the ephemeral range
cands = list(range(max(1024, top - 5000), top + 1))
random.shuffle(cands)
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        return True
    except OSError:
        return False
    finally:
        s.close()
for p in cands:
    if len(out) == n: break
    if free(p) and free(p + 10000): out.append(p)
print(" ".join(map(str, out)))
EOF
}

# wait_ping PORT LOG: waits until the server on PORT answers; if it does
# not, shows its log (why it did not start) and fails.
wait_ping() {
	for _ in $(seq 200); do
		redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	redis-cli -p "$1" ping >/dev/null || { echo "redis-server on port $1 did not answer; its log:"; cat "$2"; return 1; }
}

# redis_start: the servers, their addresses exported.
redis_start() {
	bash "$(dirname "${BASH_SOURCE[0]}")/../../scripts/preflight" redis >/dev/null
	local port c1 c2 c3 p ok common
	read -r port c1 c2 c3 < <(free_ports 4)
	common=(--bind 127.0.0.1 --save "" --appendonly no --daemonize no --loglevel warning --dir "$redis_dir")
	redis-server --port "$port" "${common[@]}" >"$redis_dir/single.log" 2>&1 &
	redis_pids+=($!)
	for p in $c1 $c2 $c3; do
		redis-server --port "$p" "${common[@]}" --cluster-enabled yes --cluster-config-file "nodes-$p.conf" \
			--cluster-node-timeout 2000 --cluster-require-full-coverage no >"$redis_dir/cluster-$p.log" 2>&1 &
		redis_pids+=($!)
	done
	wait_ping "$port" "$redis_dir/single.log"
	for p in $c1 $c2 $c3; do wait_ping "$p" "$redis_dir/cluster-$p.log"; done
	redis-cli --cluster create "127.0.0.1:$c1" "127.0.0.1:$c2" "127.0.0.1:$c3" --cluster-replicas 0 --cluster-yes >"$redis_dir/create.log"
	for _ in $(seq 200); do
		ok=1
		for p in $c1 $c2 $c3; do
			redis-cli -p "$p" cluster info | grep -q '^cluster_state:ok' || ok=0
		done
		[[ $ok == 1 ]] && break
		sleep 0.05
	done
	[[ $ok == 1 ]] || { echo "the cluster did not reach cluster_state:ok"; cat "$redis_dir/create.log"; exit 1; }

	export HOTLIMIT_REDIS_ADDR="127.0.0.1:$port"
	export HOTLIMIT_REDIS_CLUSTER="127.0.0.1:$c1,127.0.0.1:$c2,127.0.0.1:$c3"
}

if [[ -z ${HOTLIMIT_REDIS_ADDR:-} || -z ${HOTLIMIT_REDIS_CLUSTER:-} ]]; then
	redis_start
fi
