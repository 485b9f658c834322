module github.com/hotlimit/hotlimit/linearize

go 1.26.8

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/hotlimit/hotlimit v0.0.0
)

require github.com/cespare/xxhash/v2 v2.3.0 // indirect

replace github.com/hotlimit/hotlimit => ../
