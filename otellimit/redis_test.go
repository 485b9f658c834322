package otellimit

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestRedis drives each hook as redislimit calls it and checks every
// instrument's exact counts, and that node and limiter names beyond the
// bounds are "_OTHER".
func TestRedis(t *testing.T) {
	rg := newRig()
	rm, err := NewRedis(rg.mp)
	if err != nil {
		t.Fatal(err)
	}
	down := fmt.Errorf("redislimit: Redis could not decide: %w", errors.New("connection refused"))
	rm.Call("10.0.0.1:6379", time.Millisecond, nil)
	rm.Call("10.0.0.1:6379", 2*time.Millisecond, nil)
	rm.Call("10.0.0.1:6379", 50*time.Millisecond, context.DeadlineExceeded)
	rm.Call("10.0.0.2:6379", time.Millisecond, down)
	rm.Failure("search", hotlimit.Decision{Allowed: true}, down)        // fail-open
	rm.Failure("search", hotlimit.Decision{}, context.DeadlineExceeded) // fail-closed
	rm.Failure("search", hotlimit.Decision{}, fmt.Errorf("x: %w", context.DeadlineExceeded))
	rm.Breaker("10.0.0.2:6379", "closed", "open")
	rm.Breaker("10.0.0.2:6379", "open", "half-open")
	rm.LocalDenial("search")
	rm.LocalDenial("search")
	for i := range 70 { // more nodes than the bound
		rm.Call(fmt.Sprintf("10.1.0.%d:6379", i), time.Millisecond, nil)
	}
	got := rg.collect(t)
	want := map[string]int64{
		"hotlimit.redis.call.duration{hotlimit.redis.node=10.0.0.1:6379}":                                                                        2,
		"hotlimit.redis.call.duration{error.type=timeout,hotlimit.redis.node=10.0.0.1:6379}":                                                     1,
		"hotlimit.redis.call.duration{error.type=_OTHER,hotlimit.redis.node=10.0.0.2:6379}":                                                      1,
		"hotlimit.redis.fallback{error.type=_OTHER,hotlimit.decision=allowed,hotlimit.limit=search}":                                             1,
		"hotlimit.redis.fallback{error.type=timeout,hotlimit.decision=denied,hotlimit.limit=search}":                                             2,
		"hotlimit.redis.breaker.changes{hotlimit.redis.breaker.from=closed,hotlimit.redis.breaker.to=open,hotlimit.redis.node=10.0.0.2:6379}":    1,
		"hotlimit.redis.breaker.changes{hotlimit.redis.breaker.from=open,hotlimit.redis.breaker.to=half-open,hotlimit.redis.node=10.0.0.2:6379}": 1,
		"hotlimit.redis.local_denials{hotlimit.limit=search}":                                                                                    2,
	}
	// 64 nodes in all: the 2 above and 62 of the 70 new ones; 8 are _OTHER.
	others := int64(0)
	for k, v := range got {
		if _, ok := want[k]; ok {
			continue
		}
		if k == "hotlimit.redis.call.duration{hotlimit.redis.node=_OTHER}" {
			others = v
		} else if v != 1 {
			t.Errorf("%s = %d, want 1", k, v)
		}
		delete(got, k)
	}
	if others != 8 {
		t.Errorf("%d calls to nodes beyond the bound, want 8", others)
	}
	compare(t, got, want)
}

// TestRedisSignatures checks, from redislimit's source, that Redis's
// methods still have the signatures of the redislimit.Hooks fields they
// are documented to fill (otellimit does not import redislimit, so the
// compiler cannot).
func TestRedisSignatures(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "redislimit", "hooks.go"), nil, 0)
	if err != nil {
		t.Skipf("redislimit's source is not beside otellimit: %v", err)
	}
	fields := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Hooks" {
			return true
		}
		for _, fld := range ts.Type.(*ast.StructType).Fields.List {
			ft, ok := fld.Type.(*ast.FuncType)
			if !ok {
				continue
			}
			var params []string
			for _, p := range ft.Params.List {
				var b strings.Builder
				printer.Fprint(&b, token.NewFileSet(), p.Type)
				for range max(1, len(p.Names)) {
					params = append(params, b.String())
				}
			}
			for _, name := range fld.Names {
				fields[name.Name] = "func(" + strings.Join(params, ", ") + ")"
			}
		}
		return false
	})
	rm := &Redis{}
	for name, m := range map[string]any{"Call": rm.Call, "Failure": rm.Failure, "LocalDenial": rm.LocalDenial, "Breaker": rm.Breaker} {
		if got, want := reflect.TypeOf(m).String(), fields[name]; got != want {
			t.Errorf("Redis.%s is %s; redislimit.Hooks.%s is %q", name, got, name, want)
		}
	}
}
