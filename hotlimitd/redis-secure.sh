# Sourced (bash) by hotlimitd/test.sh after internal/redistest/servers.sh,
# whose free_ports, $redis_dir and $redis_pids (killed when the script
# exits) it uses: starts, on free loopback ports, the private Redis servers
# the backend's TLS, AUTH and Sentinel tests need, and exports where they
# are:
#   HOTLIMIT_REDIS_TLS_ADDR, HOTLIMIT_REDIS_TLS_DIR: a server on TLS only
#     that requires a client certificate; the directory holds ca.crt,
#     client.crt and client.key (made here with openssl, for 127.0.0.1);
#   HOTLIMIT_REDIS_AUTH_ADDR, HOTLIMIT_REDIS_AUTH_PASSWORD: a server with
#     requirepass (the default user's password), and
#     HOTLIMIT_REDIS_ACL_USER, HOTLIMIT_REDIS_ACL_PASSWORD, an ACL user of it;
#   HOTLIMIT_REDIS_SENTINEL_ADDR, HOTLIMIT_REDIS_SENTINEL_MASTER,
#     HOTLIMIT_REDIS_SENTINEL_PASSWORD: a Sentinel that requires a
#     password, monitoring a private master (its address is
#     HOTLIMIT_REDIS_SENTINEL_MASTER_ADDR) whose own password is
#     HOTLIMIT_REDIS_SENTINEL_MASTER_PASSWORD.
# The passwords are drawn at random here. Expects set -euo pipefail.

bash ../scripts/preflight openssl >/dev/null

secure_dir="$redis_dir/secure"
mkdir -p "$secure_dir"
pw() { openssl rand -hex 16; }

# A CA, a server certificate for 127.0.0.1 and a client certificate.
(
	cd "$secure_dir"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=hotlimitd test CA" -keyout ca.key -out ca.crt 2>/dev/null
	for who in server client; do
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
			-subj "/CN=hotlimitd test $who" -keyout "$who.key" -out "$who.csr" 2>/dev/null
		printf 'subjectAltName=IP:127.0.0.1\n' >"$who.ext"
		openssl x509 -req -in "$who.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
			-extfile "$who.ext" -out "$who.crt" 2>/dev/null
	done
)

read -r tls_port auth_port master_port sentinel_port < <(free_ports 4)
auth_pw=$(pw) acl_pw=$(pw) master_pw=$(pw) sentinel_pw=$(pw)
secure_common=(--bind 127.0.0.1 --save "" --appendonly no --daemonize no --loglevel warning --dir "$secure_dir")

redis-server --port 0 --tls-port "$tls_port" --tls-cert-file "$secure_dir/server.crt" \
	--tls-key-file "$secure_dir/server.key" --tls-ca-cert-file "$secure_dir/ca.crt" \
	--tls-auth-clients yes "${secure_common[@]}" >"$secure_dir/tls.log" 2>&1 &
redis_pids+=($!)
redis-server --port "$auth_port" --requirepass "$auth_pw" \
	--user hotlimitd on ">$acl_pw" '~*' '&*' '+@all' "${secure_common[@]}" >"$secure_dir/auth.log" 2>&1 &
redis_pids+=($!)
redis-server --port "$master_port" --requirepass "$master_pw" "${secure_common[@]}" >"$secure_dir/master.log" 2>&1 &
redis_pids+=($!)
cat >"$secure_dir/sentinel.conf" <<EOF
port $sentinel_port
bind 127.0.0.1
dir $secure_dir
requirepass $sentinel_pw
sentinel monitor hotmaster 127.0.0.1 $master_port 1
sentinel auth-pass hotmaster $master_pw
EOF
redis-server "$secure_dir/sentinel.conf" --sentinel >"$secure_dir/sentinel.log" 2>&1 &
redis_pids+=($!)

# secure_wait LOG CMD...: waits until CMD prints what a ready server
# answers (PONG, or the master's address), else shows LOG and fails.
secure_wait() {
	local log=$1
	shift
	for _ in $(seq 200); do
		[[ $("$@" 2>/dev/null | head -1) =~ ^(PONG|127\.0\.0\.1)$ ]] && return 0
		sleep 0.05
	done
	echo "a secure redis-server did not answer ($*); its log:"
	cat "$log"
	return 1
}
secure_wait "$secure_dir/tls.log" redis-cli -p "$tls_port" --tls --cacert "$secure_dir/ca.crt" \
	--cert "$secure_dir/client.crt" --key "$secure_dir/client.key" ping
secure_wait "$secure_dir/auth.log" redis-cli -p "$auth_port" --no-auth-warning -a "$auth_pw" ping
secure_wait "$secure_dir/master.log" redis-cli -p "$master_port" --no-auth-warning -a "$master_pw" ping
secure_wait "$secure_dir/sentinel.log" redis-cli -p "$sentinel_port" --no-auth-warning -a "$sentinel_pw" \
	sentinel get-master-addr-by-name hotmaster

export HOTLIMIT_REDIS_TLS_ADDR="127.0.0.1:$tls_port" HOTLIMIT_REDIS_TLS_DIR="$secure_dir"
export HOTLIMIT_REDIS_AUTH_ADDR="127.0.0.1:$auth_port" HOTLIMIT_REDIS_AUTH_PASSWORD="$auth_pw"
export HOTLIMIT_REDIS_ACL_USER=hotlimitd HOTLIMIT_REDIS_ACL_PASSWORD="$acl_pw"
export HOTLIMIT_REDIS_SENTINEL_ADDR="127.0.0.1:$sentinel_port" HOTLIMIT_REDIS_SENTINEL_MASTER=hotmaster
export HOTLIMIT_REDIS_SENTINEL_PASSWORD="$sentinel_pw"
export HOTLIMIT_REDIS_SENTINEL_MASTER_ADDR="127.0.0.1:$master_port" HOTLIMIT_REDIS_SENTINEL_MASTER_PASSWORD="$master_pw"
