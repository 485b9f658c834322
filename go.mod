module github.com/hotlimit/hotlimit

// Go 1.25: the tests use testing/synctest and sync.WaitGroup.Go. The
// packages a consumer builds need Go 1.22 (range over an int,
// hex.AppendEncode), the tests' reference model Go 1.23 (iterators).
go 1.25.0

require github.com/cespare/xxhash/v2 v2.3.0
