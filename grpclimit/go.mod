module github.com/hotlimit/hotlimit/grpclimit

go 1.26.0

require (
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4
	github.com/hotlimit/hotlimit v0.1.0
	go.uber.org/goleak v1.3.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

// For development: `go mod tidy` here ignores go.work, and the versions
// required above exist only once tagged. The go command ignores replace
// directives in a dependency's go.mod, so consumers are unaffected.
replace github.com/hotlimit/hotlimit => ../
