module github.com/hotlimit/hotlimit

go 1.26.8

require github.com/cespare/xxhash/v2 v2.3.0
