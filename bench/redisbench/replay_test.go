package redisbench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkBatchReplay sends one batch of BenchmarkWindows' call (6
// decisions of 1 or 3 fixed-window layers) b.N times, as the script call
// redislimit made: the batch is taken from redislimit itself (a go-redis
// hook keeps the first script call of that many decisions, and the
// scripts loaded), so the arguments are redislimit's whatever their
// format. It is meant for counting the server's instructions per
// decision, which a loaded machine does not change: callgrind.sh runs it
// with -test.benchtime 50x and 250x against a redis-server under
// valgrind's callgrind (HOTLIMIT_REPLAY_ADDR; the batch is taken on
// HOTLIMIT_REDIS_ADDR, whose scripts it flushes first so that redislimit
// loads them where the hook sees them) and divides the difference of the
// totals by 200 times 6. Every decision is admitted: 1,000 a second per
// key, and one batch's 6 keys take at most b.N a window.
func BenchmarkBatchReplay(b *testing.B) {
	for _, layers := range []int{1, 3} {
		b.Run(fmt.Sprintf("layers=%d/decisions=6", layers), func(b *testing.B) {
			replayBatch(b, layers, 6)
		})
	}
}

func replayBatch(b *testing.B, layers, m int) {
	addr := redistest.Addr(b)
	h := &batchTaker{decisions: m}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true, PoolSize: 64, Protocol: 2, DisableIdentity: true})
	b.Cleanup(func() { c.Close() })
	c.AddHook(h)
	replayAddr := os.Getenv("HOTLIMIT_REPLAY_ADDR")
	if replayAddr != "" {
		// So that redislimit loads its scripts again, where the hook sees
		// them: the replay's server has none (a client of the server that
		// calls a script meanwhile sends it again, as go-redis does on
		// NOSCRIPT).
		if err := c.ScriptFlush(context.Background()).Err(); err != nil {
			b.Fatal(err)
		}
	}
	rb := windowsBackend(b, c, layers)
	// Concurrent decisions until redislimit has sent a batch of m (a
	// bounded number of rounds; the batches' sizes vary with the schedule).
	for round := 0; h.batch() == nil; round++ {
		if round == 100 {
			b.Fatalf("no script call of %d decisions in %d rounds of 64 callers", m, round)
		}
		var wg sync.WaitGroup
		for g := range 64 {
			wg.Go(func() {
				ls, st := make([]admission.Layer, layers), make([]hotlimit.LayerState, layers)
				for i := range 8 {
					k := "k" + strconv.Itoa((round*64*8+g*8+i)%1000)
					for j := range ls {
						ls[j] = admission.Layer{Limit: "d" + strconv.Itoa(j), Key: k, Cost: 1}
					}
					if _, _, err := rb.AllowStates(context.Background(), ls, st); err != nil {
						b.Error(err)
					}
				}
			})
		}
		wg.Wait()
	}
	args, scripts := h.batch(), h.loaded()
	target := c
	if replayAddr != "" {
		target = redis.NewClient(&redis.Options{Addr: replayAddr, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
		defer target.Close()
	}
	ctx := context.Background()
	for _, src := range scripts {
		if err := target.ScriptLoad(ctx, src).Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := target.Do(ctx, args...).Slice(); err != nil {
			b.Fatal(err)
		}
	}
}

// batchTaker is a go-redis hook that keeps the scripts loaded and the
// first EVALSHA of a given number of decisions (batch.lua's ARGV[2]).
type batchTaker struct {
	decisions int
	mu        sync.Mutex
	scripts   []string
	args      []any
}

func (h *batchTaker) batch() []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.args
}

func (h *batchTaker) loaded() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.scripts
}

func (h *batchTaker) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *batchTaker) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *batchTaker) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		name := strings.ToLower(fmt.Sprint(a[0]))
		h.mu.Lock()
		switch {
		case name == "script" && len(a) == 3 && strings.EqualFold(fmt.Sprint(a[1]), "load"):
			h.scripts = append(h.scripts, fmt.Sprint(a[2]))
		case name == "eval" && len(a) > 1:
			h.scripts = append(h.scripts, fmt.Sprint(a[1]))
		case name == "evalsha" && h.args == nil && len(a) > 3:
			// evalsha sha numkeys keys... ARGV[1] (the instant) ARGV[2] (m) ...
			if nk, err := strconv.Atoi(fmt.Sprint(a[2])); err == nil && 3+nk+1 < len(a) && fmt.Sprint(a[3+nk+1]) == strconv.Itoa(h.decisions) {
				h.args = append([]any(nil), a...)
			}
		}
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}
