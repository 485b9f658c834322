module github.com/hotlimit/hotlimit/promlimit

go 1.26.0

require (
	github.com/hotlimit/hotlimit v0.1.0
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/client_model v0.6.3
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// For development: `go mod tidy` here ignores go.work, and the versions
// required above exist only once tagged. The go command ignores replace
// directives in a dependency's go.mod, so consumers are unaffected.
replace github.com/hotlimit/hotlimit => ../
