package grpclimit_test

// A differential test of the interceptors seen from a real client: every
// unary call and stream of a three-layer interceptor (group, global,
// identity layer) is compared with what independent limiters of the same
// policies, asked one layer at a time, say the all-or-nothing decision and
// each layer's state are.

import (
	"context"
	"fmt"
	"github.com/hotlimit/hotlimit/admission"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
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
	"github.com/hotlimit/hotlimit/internal/layeroracle"
	"github.com/hotlimit/hotlimit/internal/sfv"
)

func TestOracleMetadata(t *testing.T) {
	names := layeroracle.Algorithms
	for i, ga := range names {
		ia := names[(i+2)%len(names)]
		t.Run(ga+"+"+ia, func(t *testing.T) {
			oracleGRPC(t, layeroracle.Policy(ga, 0), layeroracle.Policy(ia, 0), layeroracle.Policy(names[(i+1)%len(names)], 0), false)
		})
	}
}

// TestOracleNoMetadata is TestOracleMetadata with Config.NoMetadata: the
// status details and the pushback trailer only.
func TestOracleNoMetadata(t *testing.T) {
	names := layeroracle.Algorithms
	for i, ga := range names {
		ia := names[(i+4)%len(names)]
		t.Run(ga+"+"+ia, func(t *testing.T) {
			oracleGRPC(t, layeroracle.Policy(ga, 0), layeroracle.Policy(ia, 0), layeroracle.Policy(names[(i+3)%len(names)], 0), true)
		})
	}
}

func oracleGRPC(t *testing.T, gp, ip, glp hotlimit.Policy, noMD bool) {
	var mu sync.Mutex
	var last admission.Event // the hook's event of the latest call
	clock := hotlimit.NewManualClock()
	clock.Set(1000*time.Second + 250*time.Millisecond)
	ic := newIC(t, nil, grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"grp": gp, "glob": glp, "per-tenant": ip},
		Groups:       []grpclimit.Group{{Name: "health", Methods: []string{"/grpc.health.v1.Health/*"}, Limit: "grp", Costs: map[string]int64{mWatch: 2}}},
		DefaultGroup: "health",
		Key:          grpclimit.PeerKey(nil),
		Global:       "glob",
		Identities:   []grpclimit.IdentityLimit{{Limit: "per-tenant", Key: grpclimit.MetadataKey("x-tenant")}},
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)),
		Wait:         func(context.Context, time.Duration) error { return nil },
		Hook: func(ev admission.Event) {
			mu.Lock()
			defer mu.Unlock()
			last = ev
		},
		NoMetadata: noMD,
	})
	client := serveIC(t, ic)
	layers, err := layeroracle.NewLayers(clock, layeroracle.Spec{Name: "grp", Policy: gp}, layeroracle.Spec{Name: "glob", Policy: glp}, layeroracle.Spec{Name: "per-tenant", Policy: ip})
	if err != nil {
		t.Fatal(err)
	}
	defer layeroracle.Close(layers)
	rng := rand.New(rand.NewPCG(uint64(len(t.Name())), 9))
	seen := map[codes.Code]int{}
	nevers := 0
	for step := range 200 {
		// Time moves, and now and then a layer's policy changes (in the
		// oracle too); variant 2 has capacity 1, so a stream (cost 2 in the
		// group's layer) can then never pass.
		if err := layeroracle.Perturb(rng, clock, layers, 8, ic.Backend().(*admission.Local).Classes().SetPolicy); err != nil {
			t.Fatal(err)
		}
		stream := rng.IntN(3) == 0
		layers[0].Cost = 1
		if stream {
			layers[0].Cost = 2
		}
		v := layeroracle.Decide("k", layers)
		allowed, never, wait, st := v.Allowed, v.Never, v.Wait, v.States
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
				if got, want := first(md, grpclimit.MDRetryAfter), strconv.FormatInt(max(1, layeroracle.CeilSeconds(wait)), 10); !noMD && got != want {
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
		// The hook's event describes the same decision: its outcome, the
		// binding layer's limit and that layer's Remaining.
		mu.Lock()
		ev := last
		mu.Unlock()
		wantOutcome := admission.OutcomeAllowed
		switch {
		case never:
			wantOutcome = admission.OutcomeDeniedNever
		case !allowed:
			wantOutcome = admission.OutcomeDenied
		}
		if b := layers[v.Binding]; ev.Outcome != wantOutcome || ev.Limit != b.Name || ev.Decision.Remaining != st[v.Binding].Remaining || ev.Group != "health" {
			t.Fatalf("%s: hook event %v %q %+v, oracle %v %q remaining %d", where, ev.Outcome, ev.Limit, ev.Decision, wantOutcome, b.Name, st[v.Binding].Remaining)
		}
		if noMD {
			// Only a refusal's pushback: no quota metadata (beside gRPC's
			// own content-type and status details).
			md = md.Copy()
			delete(md, "content-type")
			delete(md, "grpc-status-details-bin")
			if n := len(md.Get(grpclimit.MDPushback)); len(md) != n || allowed == (n != 0) {
				t.Fatalf("%s: with NoMetadata, allowed %v: %q", where, allowed, slices.Collect(maps.Keys(md)))
			}
			continue
		}
		pol, err := sfv.ParseList(first(md, grpclimit.MDPolicy))
		if err != nil || len(pol) != len(layers) {
			t.Fatalf("%s: %s %q: %v", where, grpclimit.MDPolicy, first(md, grpclimit.MDPolicy), err)
		}
		rl, err := sfv.ParseList(first(md, grpclimit.MDLayers))
		if err != nil || len(rl) != len(layers) {
			t.Fatalf("%s: %s %q: %v", where, grpclimit.MDLayers, first(md, grpclimit.MDLayers), err)
		}
		for i, l := range layers {
			q := l.Lim.Describe().Limit
			if pol[i].Value.Str != l.Name || rl[i].Value.Str != l.Name {
				t.Fatalf("%s: item %d named %q / %q, want %q", where, i, pol[i].Value.Str, rl[i].Value.Str, l.Name)
			}
			if qv, _ := pol[i].Params.Get("q"); qv.Int != q {
				t.Fatalf("%s: %s q=%d, want %d", where, l.Name, qv.Int, q)
			}
			rv, _ := rl[i].Params.Get("r")
			if rv.Int != st[i].Remaining {
				t.Fatalf("%s: %s r=%d, oracle %d (%q)", where, l.Name, rv.Int, st[i].Remaining, first(md, grpclimit.MDLayers))
			}
			tv, hasT := rl[i].Params.Get("t")
			if st[i].Next == 0 && hasT || st[i].Next != 0 && (!hasT || tv.Int != layeroracle.CeilSeconds(st[i].Next)) {
				t.Fatalf("%s: %s t=%d (present %v), oracle %v", where, l.Name, tv.Int, hasT, st[i].Next)
			}
		}
		b := layers[v.Binding]
		if first(md, grpclimit.MDName) != b.Name || first(md, grpclimit.MDLimit) != strconv.FormatInt(b.Lim.Describe().Limit, 10) ||
			first(md, grpclimit.MDRemaining) != strconv.FormatInt(st[v.Binding].Remaining, 10) {
			t.Fatalf("%s: ratelimit-name/-limit/-remaining %q %q %q; the binding layer %s has %d of %d", where,
				first(md, grpclimit.MDName), first(md, grpclimit.MDLimit), first(md, grpclimit.MDRemaining), b.Name, st[v.Binding].Remaining, b.Lim.Describe().Limit)
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
