#!/usr/bin/env bash
# Tests of the redislimit module against a private redis-server: gofmt,
# vet, go test -race, and one iteration of every benchmark in
# bench/redisbench. Installs redis-server (apt-get) when it is absent.
# Usage: bash redislimit/test.sh
set -euo pipefail
cd "$(dirname "$0")"

command -v redis-server >/dev/null || (apt-get update && apt-get install -y redis-server)

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
	echo $((20000 + RANDOM % 20000)))
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no --loglevel warning &
redis_pid=$!
trap 'kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null || true' EXIT
export HOTLIMIT_REDIS_ADDR="127.0.0.1:$port"
for _ in $(seq 100); do
	redis-cli -p "$port" ping >/dev/null 2>&1 && break
	sleep 0.05
done
redis-cli -p "$port" ping >/dev/null

echo "== redislimit: gofmt, vet"
unformatted=$(gofmt -l . ../bench/redisbench)
if [[ -n "$unformatted" ]]; then
	echo "not gofmt'ed:"; echo "$unformatted"; exit 1
fi
go vet ./...

echo "== redislimit: go test -race (server $HOTLIMIT_REDIS_ADDR)"
go test -race -count=1 ./...

echo "== bench/redisbench: vet, every benchmark once"
(
	cd ../bench/redisbench
	go vet ./...
	go test -count=1 -run . -bench . -benchtime 1x ./...
)
