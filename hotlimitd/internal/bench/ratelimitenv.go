package bench

import "strconv"

// RatelimitEnv returns the environment that envoyproxy/ratelimit's
// service_cmd needs to serve, on loopback, the configuration files of
// runtimeRoot/ratelimit/config from the Redis at redisAddr, with keys
// that start with prefix: its HTTP, gRPC and debug ports are ports[0],
// [1] and [2]. Its statsd sink is off and it logs warnings only.
func RatelimitEnv(runtimeRoot, redisAddr, prefix string, ports []int) []string {
	return []string{
		"RUNTIME_ROOT=" + runtimeRoot,
		"RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_APPDIRECTORY=config",
		"RUNTIME_WATCH_ROOT=false",
		"RUNTIME_IGNOREDOTFILES=true",
		"REDIS_SOCKET_TYPE=tcp",
		"REDIS_TYPE=SINGLE",
		"REDIS_URL=" + redisAddr,
		"CACHE_KEY_PREFIX=" + prefix,
		"USE_STATSD=false",
		"LOG_LEVEL=warn",
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[0]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[2]),
	}
}
