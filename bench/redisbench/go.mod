module github.com/hotlimit/hotlimit/bench/redisbench

go 1.26.0

require (
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/hotlimit/hotlimit v0.1.0
	github.com/hotlimit/hotlimit/redislimit v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/hotlimit/hotlimit/internal/redistest v0.1.0
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

// For development: `go mod tidy` here ignores go.work, and the versions
// required above exist only once tagged. The go command ignores replace
// directives in a dependency's go.mod, so consumers are unaffected.
replace (
	github.com/hotlimit/hotlimit => ../../
	github.com/hotlimit/hotlimit/internal/redistest => ../../internal/redistest
	github.com/hotlimit/hotlimit/redislimit => ../../redislimit
)
