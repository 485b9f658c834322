package redislimit

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
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

// isTimeout reports whether err is a timeout, as the Hooks.Call doc
// defines one: its deadline passed before Redis answered.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// open reports whether b refuses calls to some node right now: its
// circuit open and still cooling down, or half-open with its probe in
// flight.
func (b *Breaker) open() bool {
	if m := b.nodes.Load(); m != nil {
		for _, c := range *m {
			switch c.cb.State() {
			case gobreaker.StateOpen:
				return true
			case gobreaker.StateHalfOpen:
				if n := c.cb.Counts(); n.Requests > n.TotalExclusions {
					return true
				}
			}
		}
	}
	return false
}

// replyOf returns bc's reply, once its batch is back, as script.lua's
// integers for layers, the layers of the call: the short reply of fixed
// windows (bc.short) expanded as run expands it.
func replyOf(bc *batchCall, layers []Layer) []int64 {
	if bc.short {
		return admittedWindows(bc.reply, bc.now, layers, bc.next, nil)
	}
	r := make([]int64, len(bc.reply))
	for i, v := range bc.reply {
		r[i] = v.(int64)
	}
	return r
}

// batchCallOf returns the batchCall that run makes of layers: their Redis
// keys, script.lua's arguments and the next flag, due in 5 s.
func batchCallOf(layers []Layer, next bool) *batchCall {
	keys := make([]string, len(layers))
	for i, ly := range layers {
		keys[i] = ly.Limiter.RedisKey(ly.Key)
	}
	args, windows := scriptArgs(layers, next, "")
	args[0] = "" // the batch's instant, not the call's
	return &batchCall{keys: keys, args: args, next: next, windows: windows, deadline: time.Now().Add(5 * time.Second)}
}
