package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
)

// TestTwoReplicasOnRedis: two hotlimitd processes' worth of servers on
// one Redis (-backend redis) share each limit exactly: requests spread
// over both are admitted exactly requests_per_unit times. It needs
// HOTLIMIT_REDIS_ADDR (hotlimitd/test.sh starts a private redis-server).
func TestTwoReplicasOnRedis(t *testing.T) {
	addr := os.Getenv("HOTLIMIT_REDIS_ADDR")
	if addr == "" {
		t.Skip("HOTLIMIT_REDIS_ADDR is not set (hotlimitd/test.sh sets it)")
	}
	// A domain of its own, so that no earlier run's state counts.
	domain := fmt.Sprintf("replicas%d", time.Now().UnixNano())
	path := filepath.Join(t.TempDir(), "limits.yaml")
	yaml := "domain: " + domain + "\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 7\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startCmd(t, nil, "-config", path, "-backend", "redis", "-redis", addr)
	b := startCmd(t, nil, "-config", path, "-backend", "redis", "-redis", addr)
	ok := 0
	for i := range 20 {
		r := a
		if i%2 == 1 {
			r = b
		}
		if r.ask(t, domain, "user", "ann").OverallCode == rlsv3.RateLimitResponse_OK {
			ok++
		}
	}
	if ok != 7 {
		t.Fatalf("%d of 20 admitted over two replicas, want exactly 7", ok)
	}
}

// TestRedisSecureFlags: the command decides on a Redis over TLS with a
// client certificate (-redis-tls, -redis-tls-ca, -redis-tls-cert,
// -redis-tls-key), as an ACL user whose password is in a file
// (-redis-username, -redis-password-file), and on the master a Sentinel
// names (-redis-sentinel, its password and the master's from the
// environment): each admits exactly requests_per_unit. Flags that do not
// go together are refused at start. It needs the servers
// hotlimitd/redis-secure.sh starts, and fails with any flag not passed on
// (the command does not start: Redis refuses it).
func TestRedisSecureFlags(t *testing.T) {
	env := map[string]string{}
	for _, n := range []string{"HOTLIMIT_REDIS_TLS_ADDR", "HOTLIMIT_REDIS_TLS_DIR", "HOTLIMIT_REDIS_AUTH_ADDR",
		"HOTLIMIT_REDIS_ACL_USER", "HOTLIMIT_REDIS_ACL_PASSWORD", "HOTLIMIT_REDIS_SENTINEL_ADDR",
		"HOTLIMIT_REDIS_SENTINEL_MASTER", "HOTLIMIT_REDIS_SENTINEL_PASSWORD", "HOTLIMIT_REDIS_SENTINEL_MASTER_PASSWORD"} {
		if env[n] = os.Getenv(n); env[n] == "" {
			t.Skipf("%s is not set (hotlimitd/test.sh sets it)", n)
		}
	}
	domain := fmt.Sprintf("secure%d", time.Now().UnixNano())
	dir := t.TempDir()
	path := filepath.Join(dir, "limits.yaml")
	yaml := "domain: " + domain + "\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 3\n"
	pwFile := filepath.Join(dir, "password")
	writeFile(t, path, []byte(yaml))
	writeFile(t, pwFile, []byte(env["HOTLIMIT_REDIS_ACL_PASSWORD"]+"\n"))
	tlsDir := env["HOTLIMIT_REDIS_TLS_DIR"]
	for name, c := range map[string]struct {
		args []string
		env  map[string]string
	}{
		"tls": {args: []string{"-redis", env["HOTLIMIT_REDIS_TLS_ADDR"], "-redis-tls", "-redis-tls-ca", filepath.Join(tlsDir, "ca.crt"),
			"-redis-tls-cert", filepath.Join(tlsDir, "client.crt"), "-redis-tls-key", filepath.Join(tlsDir, "client.key")}},
		"acl": {args: []string{"-redis", env["HOTLIMIT_REDIS_AUTH_ADDR"], "-redis-username", env["HOTLIMIT_REDIS_ACL_USER"], "-redis-password-file", pwFile}},
		"sentinel": {
			args: []string{"-redis", env["HOTLIMIT_REDIS_SENTINEL_ADDR"], "-redis-sentinel", env["HOTLIMIT_REDIS_SENTINEL_MASTER"]},
			env: map[string]string{
				"HOTLIMITD_REDIS_PASSWORD":          env["HOTLIMIT_REDIS_SENTINEL_MASTER_PASSWORD"],
				"HOTLIMITD_REDIS_SENTINEL_PASSWORD": env["HOTLIMIT_REDIS_SENTINEL_PASSWORD"],
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			r := startCmd(t, nil, append([]string{"-config", path, "-backend", "redis"}, c.args...)...)
			ok := 0
			for range 5 {
				if r.ask(t, domain, "user", name).OverallCode == rlsv3.RateLimitResponse_OK {
					ok++
				}
			}
			if ok != 3 {
				t.Fatalf("%d of 5 admitted, want exactly 3", ok)
			}
		})
	}

	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"-redis-tls"}, "", "-backend local takes no -redis flag"},
		{[]string{"-backend", "redis", "-redis", "127.0.0.1:1", "-redis-tls-ca", pwFile}, "", "need -redis-tls"},
		{[]string{"-backend", "redis", "-redis", "127.0.0.1:1", "-redis-tls", "-redis-tls-ca", pwFile}, "", "-redis-tls-ca " + pwFile + ": no PEM"},
		{[]string{"-backend", "redis", "-redis", "127.0.0.1:1", "-redis-tls", "-redis-tls-cert", pwFile}, "", "go together"},
		{[]string{"-backend", "redis", "-redis", "127.0.0.1:1", "-redis-password-file", pwFile}, "x", "not both"},
		{[]string{"-backend", "redis", "-redis", "127.0.0.1:1", "-redis-password-file", filepath.Join(dir, "missing")}, "", "-redis-password-file"},
		{[]string{"-backend", "redis", "-redis", "127.0.0.1:1", "-redis-sentinel-password-file", pwFile}, "", "need -redis-sentinel"},
		{[]string{"-backend", "redis", "-redis", "127.0.0.1:1", "-redis-cluster", "-redis-sentinel", "m"}, "", "exclude each other"},
	} {
		t.Setenv("HOTLIMITD_REDIS_PASSWORD", tc.env)
		args := append([]string{"-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0"}, tc.args...)
		if err := run(context.Background(), args, io.Discard, io.Discard, nil, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// TestRedisPrefix: two deployments of one configuration on one Redis
// with different -redis-prefix values count apart (each admits
// requests_per_unit), and their keys start with their prefixes. It
// needs HOTLIMIT_REDIS_ADDR.
func TestRedisPrefix(t *testing.T) {
	addr := os.Getenv("HOTLIMIT_REDIS_ADDR")
	if addr == "" {
		t.Skip("HOTLIMIT_REDIS_ADDR is not set (hotlimitd/test.sh sets it)")
	}
	run := time.Now().UnixNano()
	path := filepath.Join(t.TempDir(), "limits.yaml")
	yaml := "domain: prefixed\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 3\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	prefixes := []string{fmt.Sprintf("teamA:%d:", run), fmt.Sprintf("teamB:%d:", run)}
	var cmds []*running
	for _, p := range prefixes {
		cmds = append(cmds, startCmd(t, nil, "-config", path, "-backend", "redis", "-redis", addr, "-redis-prefix", p))
	}
	ok := make([]int, len(cmds))
	for i := range 10 {
		if cmds[i%2].ask(t, "prefixed", "user", "ann").OverallCode == rlsv3.RateLimitResponse_OK {
			ok[i%2]++
		}
	}
	if ok[0] != 3 || ok[1] != 3 {
		t.Fatalf("admitted %v of 5 each under two prefixes, want 3 each (their counts apart)", ok)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for _, p := range prefixes {
		keys, err := c.Keys(context.Background(), p+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1 {
			t.Errorf("keys under %q: %q, want the one limit's key", p, keys)
		}
	}
}
