#!/usr/bin/env bash
# Tests of the redislimit module against real servers: a private
# redis-server and a private 3-master Redis Cluster, both on free loopback
# ports and torn down on exit. Runs gofmt, vet, go test -race, and one
# iteration of every benchmark in bench/redisbench. Installs redis-server
# (apt-get) when it is absent.
# Usage: bash redislimit/test.sh
set -euo pipefail
cd "$(dirname "$0")"

command -v redis-server >/dev/null || (apt-get update && apt-get install -y redis-server)

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

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

read -r port c1 c2 c3 < <(free_ports 4)
common=(--bind 127.0.0.1 --save "" --appendonly no --daemonize no --loglevel warning --dir "$tmp")
redis-server --port "$port" "${common[@]}" >"$tmp/single.log" 2>&1 &
pids+=($!)
for p in $c1 $c2 $c3; do
	redis-server --port "$p" "${common[@]}" --cluster-enabled yes --cluster-config-file "nodes-$p.conf" \
		--cluster-node-timeout 2000 --cluster-require-full-coverage no >"$tmp/cluster-$p.log" 2>&1 &
	pids+=($!)
done
wait_ping "$port" "$tmp/single.log"
for p in $c1 $c2 $c3; do wait_ping "$p" "$tmp/cluster-$p.log"; done
redis-cli --cluster create "127.0.0.1:$c1" "127.0.0.1:$c2" "127.0.0.1:$c3" --cluster-replicas 0 --cluster-yes >"$tmp/create.log"
for _ in $(seq 200); do
	ok=1
	for p in $c1 $c2 $c3; do
		redis-cli -p "$p" cluster info | grep -q '^cluster_state:ok' || ok=0
	done
	[[ $ok == 1 ]] && break
	sleep 0.05
done
[[ $ok == 1 ]] || { echo "the cluster did not reach cluster_state:ok"; cat "$tmp/create.log"; exit 1; }

export HOTLIMIT_REDIS_ADDR="127.0.0.1:$port"
export HOTLIMIT_REDIS_CLUSTER="127.0.0.1:$c1,127.0.0.1:$c2,127.0.0.1:$c3"

echo "== redislimit: gofmt, vet"
unformatted=$(gofmt -l . ../bench/redisbench)
if [[ -n "$unformatted" ]]; then
	echo "not gofmt'ed:"; echo "$unformatted"; exit 1
fi
go vet ./...

echo "== redislimit: go test -race (server $HOTLIMIT_REDIS_ADDR, cluster $HOTLIMIT_REDIS_CLUSTER)"
go test -race -count=1 ./...

echo "== bench/redisbench: vet, every benchmark once (output shown only on failure)"
(
	cd ../bench/redisbench
	go vet ./...
	# One iteration is a smoke test, not a measurement: its figures would
	# read like results, so they are shown only when it fails.
	log="$tmp/redisbench.log"
	go test -count=1 -run . -bench . -benchtime 1x ./... >"$log" 2>&1 || { cat "$log"; exit 1; }
	echo "ok (bench/redisbench/RESULTS.md has the measurements)"
)
