// Command rlsask asks a rate limit service (hotlimitd, or any
// envoy.service.ratelimit.v3.RateLimitService) what Envoy would ask, and
// prints each answer on one line: a way to try hotlimitd without Envoy
// or grpcurl.
//
//	go -C hotlimitd run ./cmd/rlsask -n 3 generic_key=demo
//
// Each argument is one descriptor, its entries separated by commas
// (remote_address=10.0.0.1,path=/login). Flags: -addr (default
// 127.0.0.1:8081), -domain (default hotlimitd, the built-in
// configuration's), -n (requests to send, default 1), -hits (the
// request's hits_addend, default 0: one hit).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "rlsask:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rlsask", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8081", "the service's gRPC `address`")
	domain := fs.String("domain", "hotlimitd", "the request's domain")
	n := fs.Int("n", 1, "requests to send")
	hits := fs.Uint("hits", 0, "the request's hits_addend (0: one hit)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 {
		return fmt.Errorf("-n %d: want at least 1 request", *n)
	}
	if *hits > math.MaxUint32 {
		return fmt.Errorf("-hits %d: the request's hits_addend is at most %d", *hits, uint32(math.MaxUint32))
	}
	req := &rlsv3.RateLimitRequest{Domain: *domain, HitsAddend: uint32(*hits)}
	for _, arg := range fs.Args() {
		d, err := parseDescriptor(arg)
		if err != nil {
			return err
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	if len(req.Descriptors) == 0 {
		return errors.New("no descriptor: give one as key=value[,key=value...]")
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	for range *n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := client.ShouldRateLimit(ctx, req)
		cancel()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, format(req, resp))
	}
	return nil
}

// parseDescriptor reads key=value[,key=value...].
func parseDescriptor(s string) (*rlv3.RateLimitDescriptor, error) {
	d := &rlv3.RateLimitDescriptor{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("descriptor %q: want key=value[,key=value...]", s)
		}
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return d, nil
}

// format writes one answer: the overall code, then each descriptor's
// code, remaining of its limit, and time until reset.
func format(req *rlsv3.RateLimitRequest, resp *rlsv3.RateLimitResponse) string {
	var b strings.Builder
	b.WriteString(resp.GetOverallCode().String())
	for i, st := range resp.GetStatuses() {
		b.WriteString(" | ")
		if i < len(req.Descriptors) {
			for j, e := range req.Descriptors[i].Entries {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(e.Key + "=" + e.Value)
			}
			b.WriteByte(' ')
		}
		b.WriteString(st.GetCode().String())
		if l := st.GetCurrentLimit(); l != nil {
			fmt.Fprintf(&b, " %d left of %d/%s", st.GetLimitRemaining(), l.GetRequestsPerUnit(), strings.ToLower(l.GetUnit().String()))
			if d := st.GetDurationUntilReset(); d != nil {
				fmt.Fprintf(&b, ", reset in %v", d.AsDuration())
			}
		} else {
			b.WriteString(" (no limit)")
		}
	}
	for _, h := range resp.GetResponseHeadersToAdd() {
		fmt.Fprintf(&b, " | %s: %s", h.GetKey(), h.GetValue())
	}
	return b.String()
}
