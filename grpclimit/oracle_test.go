package grpclimit_test

// A differential test of the interceptors seen from a real client: every
// unary call and stream of a three-layer interceptor (group, global,
// identity layer) is compared with what independent limiters of the same
// policies, asked one layer at a time, say the all-or-nothing decision and
// each layer's state are.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/hotlimit/hotlimit/internal/sfv"
)

func TestOracleMetadata(t *testing.T) {
	pols := map[string]hotlimit.Policy{
		"TokenBucket":   hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 3, Per: 2 * time.Second}, Burst: 4},
		"LeakyBucket":   hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 2, Per: 3 * time.Second}, Capacity: 3},
		"FixedWindow":   hotlimit.FixedWindow{Limit: 5, Window: 7 * time.Second},
		"SlidingWindow": hotlimit.SlidingWindow{Limit: 6, Window: 5 * time.Second},
		"SlidingLog":    hotlimit.SlidingLog{Limit: 4, Window: 6 * time.Second},
	}
	names := []string{"TokenBucket", "LeakyBucket", "FixedWindow", "SlidingWindow", "SlidingLog"}
	for i, ga := range names {
		ia := names[(i+2)%len(names)]
		t.Run(ga+"+"+ia, func(t *testing.T) {
			oracleGRPC(t, pols[ga], pols[ia], pols[names[(i+1)%len(names)]])
		})
	}
}

// grpcVariants are policies of each algorithm for SetPolicy; the second
// of each has a capacity of 1.
func grpcVariants() map[string][2]hotlimit.Policy {
	return map[string][2]hotlimit.Policy{
		"TokenBucket":   {hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 3, Per: 2 * time.Second}, Burst: 4}, hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 3 * time.Second}, Burst: 1}},
		"LeakyBucket":   {hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 2, Per: 3 * time.Second}, Capacity: 3}, hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 5, Per: 2 * time.Second}, Capacity: 0}},
		"FixedWindow":   {hotlimit.FixedWindow{Limit: 5, Window: 7 * time.Second}, hotlimit.FixedWindow{Limit: 1, Window: 3 * time.Second}},
		"SlidingWindow": {hotlimit.SlidingWindow{Limit: 6, Window: 5 * time.Second}, hotlimit.SlidingWindow{Limit: 1, Window: 9 * time.Second}},
		"SlidingLog":    {hotlimit.SlidingLog{Limit: 4, Window: 6 * time.Second}, hotlimit.SlidingLog{Limit: 1, Window: 2 * time.Second}},
	}
}

type oracleLayer struct {
	name string
	lim  *hotlimit.Limiter
	cost int64
}

func oracleGRPC(t *testing.T, gp, ip, glp hotlimit.Policy) {
	clock := hotlimit.NewManualClock()
	clock.Set(1000*time.Second + 250*time.Millisecond)
	ic := newIC(t, nil, grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"grp": gp, "glob": glp, "per-tenant": ip},
		Groups:       []grpclimit.Group{{Name: "health", Methods: []string{"/grpc.health.v1.Health/*"}, Limit: "grp", Costs: map[string]int64{mWatch: 2}}},
		DefaultGroup: "health",
		Key:          grpclimit.PeerKey(nil),
		Global:       "glob",
		Identities:   []grpclimit.IdentityLimit{{Limit: "per-tenant", Key: grpclimit.MetadataKey("x-tenant")}},
		Backend:      httplimit.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)),
		Wait:         func(context.Context, time.Duration) error { return nil },
	})
	client := serveIC(t, ic)
	var layers []oracleLayer
	for _, l := range []struct {
		name string
		p    hotlimit.Policy
	}{{"grp", gp}, {"glob", glp}, {"per-tenant", ip}} {
		lim, err := hotlimit.New(l.p, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		defer lim.Close()
		layers = append(layers, oracleLayer{name: l.name, lim: lim, cost: 1})
	}
	rng := rand.New(rand.NewPCG(uint64(len(t.Name())), 9))
	seen := map[codes.Code]int{}
	nevers := 0
	for step := range 200 {
		if rng.IntN(3) == 0 {
			clock.Advance(time.Duration(rng.Int64N(int64(3 * time.Second))))
		}
		if rng.IntN(15) == 0 {
			// A runtime policy change (same algorithm), on the interceptor's
			// backend and the oracle alike: the variants of capacity 1 make
			// a stream (cost 2 in the group's layer) never pass.
			l := layers[rng.IntN(len(layers))]
			np := grpcVariants()[l.lim.Describe().Algorithm.String()][rng.IntN(2)]
			if err := ic.Backend().(*httplimit.Local).Classes().SetPolicy(l.name, np); err != nil {
				t.Fatal(err)
			}
			if err := l.lim.SetPolicy(np); err != nil {
				t.Fatal(err)
			}
		}
		stream := rng.IntN(3) == 0
		layers[0].cost = 1
		if stream {
			layers[0].cost = 2
		}
		allowed, never := true, false
		var wait time.Duration
		for _, l := range layers {
			if c := l.lim.Check("k", l.cost); !c.Allowed {
				allowed = false
				never = never || c.RetryAfter == hotlimit.Never
				wait = max(wait, c.RetryAfter)
			}
		}
		type state struct {
			r    int64
			next time.Duration
		}
		st := make([]state, len(layers))
		for i, l := range layers {
			var d hotlimit.Decision
			if allowed {
				d = l.lim.AllowN("k", l.cost)
			} else {
				d = l.lim.Check("k", 0)
			}
			st[i].r = d.Remaining
			if d.Remaining < d.Limit {
				st[i].next = l.lim.Check("k", d.Remaining+1).RetryAfter
			}
		}
		where := fmt.Sprintf("step %d (stream %v, now %v)", step, stream, clock.Now())

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant", "acme")
		var header, trailer metadata.MD
		var err error
		if stream {
			var ws grpc.ServerStreamingClient[healthpb.HealthCheckResponse]
			ws, err = client.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = ws.Recv()
				header, _ = ws.Header()
				cancel()
				for err == nil {
					_, err = ws.Recv()
				}
				if status.Code(err) == codes.Canceled {
					err = nil
				} else {
					trailer = ws.Trailer()
				}
			}
		} else {
			_, err = client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
		}
		cancel()
		seen[status.Code(err)]++

		md := header
		if !allowed {
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("%s: %v, oracle refuses (wait %v)", where, err, wait)
			}
			if len(header) != 0 {
				t.Fatalf("%s: a refusal sent headers %v: grpc-go does not retry it", where, header)
			}
			md = trailer
			var ri *errdetails.RetryInfo
			reason := ""
			for _, d := range status.Convert(err).Details() {
				switch x := d.(type) {
				case *errdetails.RetryInfo:
					ri = x
				case *errdetails.ErrorInfo:
					reason = x.Reason
				}
			}
			if never {
				nevers++
				if reason != grpclimit.ReasonNever || ri != nil || first(md, grpclimit.MDPushback) != "-1" || len(md.Get(grpclimit.MDRetryAfter)) != 0 {
					t.Fatalf("%s: a call that can never pass: %s, RetryInfo %v, metadata %v", where, reason, ri, md)
				}
			} else {
				if reason != grpclimit.ReasonExceeded || ri == nil || ri.RetryDelay.AsDuration() != wait {
					t.Fatalf("%s: %s, RetryInfo %v, oracle %v", where, reason, ri, wait)
				}
				ms := (wait + time.Millisecond - 1) / time.Millisecond
				if got := first(md, grpclimit.MDPushback); got != strconv.FormatInt(int64(ms), 10) {
					t.Fatalf("%s: pushback %q, oracle %d ms", where, got, ms)
				}
				if got, want := first(md, grpclimit.MDRetryAfter), strconv.FormatInt(max(1, ceilSec(wait)), 10); got != want {
					t.Fatalf("%s: retry-after %q, oracle %s", where, got, want)
				}
			}
		} else {
			if err != nil {
				t.Fatalf("%s: %v, oracle admits", where, err)
			}
			if len(md.Get(grpclimit.MDPushback)) != 0 || len(md.Get(grpclimit.MDRetryAfter)) != 0 {
				t.Fatalf("%s: an admitted call carries %v", where, md)
			}
		}
		pol, err := sfv.ParseList(first(md, grpclimit.MDPolicy))
		if err != nil || len(pol) != len(layers) {
			t.Fatalf("%s: %s %q: %v", where, grpclimit.MDPolicy, first(md, grpclimit.MDPolicy), err)
		}
		rl, err := sfv.ParseList(first(md, grpclimit.MDLayers))
		if err != nil || len(rl) != len(layers) {
			t.Fatalf("%s: %s %q: %v", where, grpclimit.MDLayers, first(md, grpclimit.MDLayers), err)
		}
		found := false
		for i, l := range layers {
			q := l.lim.Describe().Limit
			if pol[i].Value.Str != l.name || rl[i].Value.Str != l.name {
				t.Fatalf("%s: item %d named %q / %q, want %q", where, i, pol[i].Value.Str, rl[i].Value.Str, l.name)
			}
			if qv, _ := pol[i].Params.Get("q"); qv.Int != q {
				t.Fatalf("%s: %s q=%d, want %d", where, l.name, qv.Int, q)
			}
			rv, _ := rl[i].Params.Get("r")
			if rv.Int != st[i].r {
				t.Fatalf("%s: %s r=%d, oracle %d (%q)", where, l.name, rv.Int, st[i].r, first(md, grpclimit.MDLayers))
			}
			tv, hasT := rl[i].Params.Get("t")
			if st[i].next == 0 && hasT || st[i].next != 0 && (!hasT || tv.Int != ceilSec(st[i].next)) {
				t.Fatalf("%s: %s t=%d (present %v), oracle %v", where, l.name, tv.Int, hasT, st[i].next)
			}
			if first(md, grpclimit.MDName) == l.name && first(md, grpclimit.MDLimit) == strconv.FormatInt(q, 10) &&
				first(md, grpclimit.MDRemaining) == strconv.FormatInt(st[i].r, 10) {
				found = true
			}
		}
		if !found {
			t.Fatalf("%s: ratelimit-name/-limit/-remaining %v describe no layer", where, md)
		}
	}
	if seen[codes.OK] == 0 || seen[codes.ResourceExhausted] == 0 || nevers == 0 {
		t.Errorf("codes seen %v, %d refusals for good: the run does not cover admissions, refusals and refusals for good", seen, nevers)
	}
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func ceilSec(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
