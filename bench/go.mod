module github.com/hotlimit/hotlimit/bench

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/go-chi/httprate v0.16.1
	github.com/hotlimit/hotlimit v0.1.0
	github.com/juju/ratelimit v1.0.2
	github.com/sethvargo/go-limiter v0.7.1
	github.com/throttled/throttled/v2 v2.15.0
	github.com/ulule/limiter/v3 v3.11.2
	go.uber.org/ratelimit v0.3.1
	golang.org/x/time v0.16.0
)

require (
	github.com/benbjohnson/clock v1.3.0 // indirect
	github.com/hashicorp/golang-lru v0.5.4 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/zeebo/xxh3 v1.0.2 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.30.0 // indirect
)

// For development: `go mod tidy` here ignores go.work, and the versions
// required above exist only once tagged. The go command ignores replace
// directives in a dependency's go.mod, so consumers are unaffected.
replace github.com/hotlimit/hotlimit => ../
