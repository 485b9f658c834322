package hotlimitd_test

import (
	"context"
	"fmt"
	"log"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/hotlimitd/backend"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
)

// A Server embedded in a program: the configuration, an in-process store
// on a manual clock (so that the output is the same at every run), and
// the requests Envoy would send. Register it on a grpc.Server to serve it
// (Server.Register), as cmd/hotlimitd does.
func ExampleServer() {
	cfg, err := config.Parse("limits.yaml", []byte(`
domain: api
descriptors:
  - key: api_key
    rate_limit:
      unit: minute
      requests_per_unit: 2
`))
	if err != nil {
		log.Fatal(err) // limits.yaml:LINE: field: what is wrong
	}
	clock := hotlimit.NewManualClock()
	st, err := backend.Open(context.Background(), backend.Options{LocalOptions: []hotlimit.Option{hotlimit.WithClock(clock)}}, cfg.Limits())
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	srv, err := hotlimitd.New(hotlimitd.Options{Config: func() *config.Config { return cfg }, Backend: st})
	if err != nil {
		log.Fatal(err)
	}
	req := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*rlv3.RateLimitDescriptor{
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "api_key", Value: "k1"}}},
	}}
	clock.Set(20e9) // 20 s into the minute
	for range 3 {
		resp, err := srv.ShouldRateLimit(context.Background(), req)
		if err != nil {
			log.Fatal(err)
		}
		st := resp.Statuses[0]
		fmt.Println(resp.OverallCode, st.LimitRemaining, "left of", st.CurrentLimit.RequestsPerUnit, "reset in", st.DurationUntilReset.AsDuration())
	}
	// Output:
	// OK 1 left of 2 reset in 40s
	// OK 0 left of 2 reset in 40s
	// OVER_LIMIT 0 left of 2 reset in 40s
}
