module github.com/hotlimit/hotlimit/linearize

go 1.25.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/hotlimit/hotlimit v0.1.0
)

require github.com/cespare/xxhash/v2 v2.3.0 // indirect

// For development: `go mod tidy` here ignores go.work, and the versions
// required above exist only once tagged. The go command ignores replace
// directives in a dependency's go.mod, so consumers are unaffected.
replace github.com/hotlimit/hotlimit => ../
