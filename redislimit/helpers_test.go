package redislimit

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// must returns v, panicking (which fails the test) on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// nodeOf returns the address of the cluster master that serves key.
func nodeOf(t testing.TB, c *redis.ClusterClient, key string) string {
	t.Helper()
	m, err := c.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return m.Options().Addr
}
