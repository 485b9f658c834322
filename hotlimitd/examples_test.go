package hotlimitd_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
)

// step sends req n times and expects every answer's codes to be want
// ("OK OVER_LIMIT": one per descriptor).
type step struct {
	descs   []*rlv3.RateLimitDescriptor
	n       int
	want    string
	advance time.Duration // the clock moves by this before the step
}

// TestEnvoyExamples drives the service over gRPC on loopback through the
// example configurations of envoyproxy/ratelimit's README (copied as
// written under config/testdata/envoy), and checks the answers each one
// promises, on a manual clock.
func TestEnvoyExamples(t *testing.T) {
	num := desc("to_number", "2061111111")
	marketing := desc("message_type", "marketing", "to_number", "2061111111")
	for _, ex := range []struct {
		file   string
		domain string
		steps  []step
	}{
		{"example1.yaml", "mongo_cps", []step{
			// 500 a second for each database.
			{descs: descs(desc("database", "users")), n: 500, want: "OK"},
			{descs: descs(desc("database", "users")), n: 2, want: "OVER_LIMIT"},
			{descs: descs(desc("database", "default")), n: 500, want: "OK"},
			{descs: descs(desc("database", "other")), n: 600, want: "OK"},
			{descs: descs(desc("database", "users"), desc("database", "default")), n: 1, want: "OVER_LIMIT OVER_LIMIT"},
			{advance: time.Second, descs: descs(desc("database", "users")), n: 500, want: "OK"},
		}},
		{"example2.yaml", "messaging", []step{
			// 5 marketing messages a day to a number, 100 messages a day
			// to it: a marketing message is checked against both.
			{descs: descs(marketing, num), n: 5, want: "OK OK"},
			{descs: descs(marketing, num), n: 3, want: "OVER_LIMIT OK"},
			{descs: descs(desc("to_number", "2062222222")), n: 100, want: "OK"},
			{descs: descs(desc("to_number", "2062222222")), n: 1, want: "OVER_LIMIT"},
			// The refused marketing messages took nothing of the 100.
			{descs: descs(num), n: 95, want: "OK"},
			{descs: descs(num), n: 1, want: "OVER_LIMIT"},
			{descs: descs(desc("message_type", "marketing")), n: 1, want: "OK"},
			{advance: 24 * time.Hour, descs: descs(marketing, num), n: 5, want: "OK OK"},
		}},
		{"example3.yaml", "edge_proxy_per_ip", []step{
			// 10 a second for each address; 50.0.0.5 always refused.
			{descs: descs(desc("remote_address", "50.0.0.1")), n: 10, want: "OK"},
			{descs: descs(desc("remote_address", "50.0.0.1")), n: 1, want: "OVER_LIMIT"},
			{descs: descs(desc("remote_address", "50.0.0.2")), n: 10, want: "OK"},
			{descs: descs(desc("remote_address", "50.0.0.5")), n: 3, want: "OVER_LIMIT"},
			{descs: descs(desc("remote_address", "50.0.0.5"), desc("remote_address", "50.0.0.3")), n: 1, want: "OVER_LIMIT OK"},
			// The refused request took nothing from 50.0.0.3.
			{descs: descs(desc("remote_address", "50.0.0.3")), n: 10, want: "OK"},
			{advance: time.Second, descs: descs(desc("remote_address", "50.0.0.1")), n: 10, want: "OK"},
		}},
		{"example4a.yaml", "example4", []step{
			// A two-entry descriptor does not match a one-level rule.
			{descs: descs(desc("key", "value", "subkey", "subvalue")), n: 400, want: "OK"},
		}},
		{"example4b.yaml", "example4", []step{
			{descs: descs(desc("key", "value", "subkey", "subvalue")), n: 300, want: "OK"},
			{descs: descs(desc("key", "value", "subkey", "subvalue")), n: 1, want: "OVER_LIMIT"},
		}},
		{"example5.yaml", "internal", []step{
			{descs: descs(desc("ldap", "anyone")), n: 500, want: "OK"},
			{descs: descs(desc("azure", "a")), n: 100, want: "OK"},
			{descs: descs(desc("azure", "a"), desc("ldap", "b")), n: 1, want: "OVER_LIMIT OK"},
			{descs: descs(desc("gcp", "a")), n: 200, want: "OK"},
		}},
		{"example6.yaml", "example6", []step{
			// user-a's limit is in shadow mode: never refused.
			{descs: descs(desc("service", "auth-service", "user", "user-a")), n: 30, want: "OK"},
			{descs: descs(desc("service", "auth-service", "user", "user-b")), n: 20, want: "OK"},
			{descs: descs(desc("service", "auth-service", "user", "user-b")), n: 1, want: "OVER_LIMIT"},
		}},
		{"example7.yaml", "example7", []step{
			// Both match: the replacing limit of 10 is decided, the
			// replaced one of 5 is not.
			{descs: descs(desc("key_1", "value_1", "user", "bkthomps"), desc("key_2", "value_2", "user", "bkthomps")), n: 10, want: "OK OK"},
			{descs: descs(desc("key_1", "value_1", "user", "bkthomps"), desc("key_2", "value_2", "user", "bkthomps")), n: 1, want: "OK OVER_LIMIT"},
			// Alone, specific_limit was left untouched: 5 a second.
			{descs: descs(desc("key_1", "value_1", "user", "bkthomps")), n: 5, want: "OK"},
			{descs: descs(desc("key_1", "value_1", "user", "bkthomps")), n: 1, want: "OVER_LIMIT"},
		}},
		{"example8.yaml", "example8", []step{
			{descs: descs(desc("key1", "unspecified_value")), n: 10, want: "OK"},
			{descs: descs(desc("key1", "unspecified_value")), n: 1, want: "OVER_LIMIT"},
			{descs: descs(desc("key1", "value1")), n: 20, want: "OK"},
			{descs: descs(desc("key1", "value1")), n: 1, want: "OVER_LIMIT"},
		}},
		{"example9.yaml", "example9", []step{
			// Each value the wildcard matches is counted apart.
			{descs: descs(desc("key1", "value1")), n: 20, want: "OK"},
			{descs: descs(desc("key1", "value1")), n: 1, want: "OVER_LIMIT"},
			{descs: descs(desc("key1", "value2")), n: 20, want: "OK"},
			{descs: descs(desc("key1", "valu")), n: 30, want: "OK"},
		}},
	} {
		t.Run(ex.file, func(t *testing.T) {
			cfg, err := config.Load(filepath.Join("config", "testdata", "envoy", ex.file))
			if err != nil {
				t.Fatal(err)
			}
			f := newFixtureConfig(t, cfg, hotlimitd.Options{})
			f.clock.Set(1000 * 24 * time.Hour) // a day's start: no window ends in a step
			client := serve(t, f.srv)
			for si, st := range ex.steps {
				f.clock.Advance(st.advance)
				req := request(ex.domain, st.descs...)
				for i := range st.n {
					resp, err := client.ShouldRateLimit(context.Background(), req)
					if err != nil {
						t.Fatalf("step %d, request %d: %v", si, i, err)
					}
					checkInvariants(t, req, resp)
					if got := codesOf(resp); got != st.want {
						t.Fatalf("step %d, request %d of %d: codes %s, want %s", si, i+1, st.n, got, st.want)
					}
				}
			}
		})
	}
}

func descs(ds ...*rlv3.RateLimitDescriptor) []*rlv3.RateLimitDescriptor { return ds }
