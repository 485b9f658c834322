// Package defaults holds the settings of the serving process that
// cmd/hotlimitd uses by default and that rlsbench serves hotlimitd with,
// so that a benchmark of hotlimitd measures the command as it ships.
// (The garbage collector's floor is heapfloor.Default.)
package defaults

import "fmt"

// StreamWorkers is the number of goroutines gRPC keeps to serve requests
// (grpc.NumStreamWorkers; cmd/hotlimitd's -grpc-stream-workers). A
// request served on one of them finds the stack that earlier requests
// grew, where a goroutine of its own starts from the smallest stack and
// grows it, copying it each time (runtime.newstack: 7% to 17% of the
// service's CPU samples on Redis); a request that finds every worker busy
// gets a goroutine of its own, as without workers. 64 measured less CPU
// per decision than 32 at 64 concurrent callers, and than none at 32 and
// 64 (hotlimitd/RESULTS.md).
const StreamWorkers = 64

// MaxStreamWorkers bounds -grpc-stream-workers.
const MaxStreamWorkers = 1 << 16

// CheckStreamWorkers returns the error of a -grpc-stream-workers out of
// [0, MaxStreamWorkers], or nil.
func CheckStreamWorkers(n int) error {
	if n < 0 || n > MaxStreamWorkers {
		return fmt.Errorf("-grpc-stream-workers must be in [0, %d], got %d", MaxStreamWorkers, n)
	}
	return nil
}
