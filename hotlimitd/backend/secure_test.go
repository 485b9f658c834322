package backend

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// secureEnv returns the variables hotlimitd/redis-secure.sh exports, by
// name; it skips the test when one is missing, except in CI, where it
// fails it.
func secureEnv(t *testing.T, names ...string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, n := range names {
		v := os.Getenv(n)
		if v == "" {
			if inCI() {
				t.Fatalf("%s is not set in CI: run hotlimitd/test.sh, which starts the TLS, AUTH and Sentinel servers", n)
			}
			t.Skipf("%s is not set: run hotlimitd/test.sh, which starts the TLS, AUTH and Sentinel servers", n)
		}
		env[n] = v
	}
	return env
}

// testTLS is the client TLS configuration for the TLS server of
// redis-secure.sh: its CA, and the client certificate unless bare.
func testTLS(t *testing.T, dir string, bare bool) *tls.Config {
	t.Helper()
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("no CA in ca.crt")
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if !bare {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// TestSecureRedis: the redis and lease backends decide on a Redis that
// speaks TLS only and requires a client certificate, on one that
// requires a password, as its ACL user, and on the master a Sentinel
// names (the Sentinel and the master each with a password): two stores
// on one of them admit exactly a key's limit between them, and the state
// is on that server (for Sentinel: on the master). Wrong credentials,
// or none, are refused at Open. It fails with any of TLS, the username,
// the passwords or the Sentinel options not given to the client.
func TestSecureRedis(t *testing.T) {
	env := secureEnv(t, "HOTLIMIT_REDIS_TLS_ADDR", "HOTLIMIT_REDIS_TLS_DIR", "HOTLIMIT_REDIS_AUTH_ADDR",
		"HOTLIMIT_REDIS_AUTH_PASSWORD", "HOTLIMIT_REDIS_ACL_USER", "HOTLIMIT_REDIS_ACL_PASSWORD",
		"HOTLIMIT_REDIS_SENTINEL_ADDR", "HOTLIMIT_REDIS_SENTINEL_MASTER", "HOTLIMIT_REDIS_SENTINEL_PASSWORD",
		"HOTLIMIT_REDIS_SENTINEL_MASTER_ADDR", "HOTLIMIT_REDIS_SENTINEL_MASTER_PASSWORD")
	dir := env["HOTLIMIT_REDIS_TLS_DIR"]
	good := map[string]struct {
		o Options
		// direct reads the server that holds the state.
		direct *redis.Options
	}{
		"tls": {
			Options{RedisAddrs: []string{env["HOTLIMIT_REDIS_TLS_ADDR"]}, TLS: testTLS(t, dir, false)},
			&redis.Options{Addr: env["HOTLIMIT_REDIS_TLS_ADDR"], TLSConfig: testTLS(t, dir, false)},
		},
		"password": {
			Options{RedisAddrs: []string{env["HOTLIMIT_REDIS_AUTH_ADDR"]}, RedisPassword: env["HOTLIMIT_REDIS_AUTH_PASSWORD"]},
			&redis.Options{Addr: env["HOTLIMIT_REDIS_AUTH_ADDR"], Password: env["HOTLIMIT_REDIS_AUTH_PASSWORD"]},
		},
		"acl": {
			Options{RedisAddrs: []string{env["HOTLIMIT_REDIS_AUTH_ADDR"]}, RedisUsername: env["HOTLIMIT_REDIS_ACL_USER"], RedisPassword: env["HOTLIMIT_REDIS_ACL_PASSWORD"]},
			&redis.Options{Addr: env["HOTLIMIT_REDIS_AUTH_ADDR"], Password: env["HOTLIMIT_REDIS_AUTH_PASSWORD"]},
		},
		"sentinel": {
			Options{
				RedisAddrs: []string{env["HOTLIMIT_REDIS_SENTINEL_ADDR"]}, SentinelMaster: env["HOTLIMIT_REDIS_SENTINEL_MASTER"],
				SentinelPassword: env["HOTLIMIT_REDIS_SENTINEL_PASSWORD"], RedisPassword: env["HOTLIMIT_REDIS_SENTINEL_MASTER_PASSWORD"],
			},
			&redis.Options{Addr: env["HOTLIMIT_REDIS_SENTINEL_MASTER_ADDR"], Password: env["HOTLIMIT_REDIS_SENTINEL_MASTER_PASSWORD"]},
		},
	}
	for name, g := range good {
		for _, kind := range []Kind{Redis, Lease} {
			t.Run(name+"/"+string(kind), func(t *testing.T) {
				const limit = 40
				o := g.o
				o.Kind, o.Prefix, o.Timeout = kind, redistest.Prefix(t), slow
				limits := map[string]hotlimit.Policy{"a": frozen(limit)}
				r1, r2 := open(t, o, limits), open(t, o, limits)
				got := hammer(t, []*Store{r1, r2}, 2, 30, []admission.Layer{{Limit: "a", Key: "k", Cost: 1}}, nil)
				if kind == Redis && got != limit || kind == Lease && (got > limit || got == 0) {
					t.Fatalf("%d admitted by two stores, want exactly %d (at most, on leases)", got, limit)
				}
				d := *g.direct
				d.MaxRetries, d.DisableIdentity = -1, true
				c := redis.NewClient(&d)
				defer c.Close()
				if n, err := c.Exists(context.Background(), o.Prefix+"a:{k}").Result(); err != nil || n != 1 {
					t.Fatalf("EXISTS %sa:{k} on %s = %d, %v; want 1: the state is not there", o.Prefix, d.Addr, n, err)
				}
			})
		}
	}

	bad := map[string]Options{
		"tls without a client certificate": {RedisAddrs: []string{env["HOTLIMIT_REDIS_TLS_ADDR"]}, TLS: testTLS(t, dir, true)},
		"tls server, plaintext client":     {RedisAddrs: []string{env["HOTLIMIT_REDIS_TLS_ADDR"]}},
		"no password":                      {RedisAddrs: []string{env["HOTLIMIT_REDIS_AUTH_ADDR"]}},
		"wrong password":                   {RedisAddrs: []string{env["HOTLIMIT_REDIS_AUTH_ADDR"]}, RedisPassword: "wrong"},
		"acl user, default password": {
			RedisAddrs: []string{env["HOTLIMIT_REDIS_AUTH_ADDR"]}, RedisUsername: env["HOTLIMIT_REDIS_ACL_USER"], RedisPassword: env["HOTLIMIT_REDIS_AUTH_PASSWORD"],
		},
		"sentinel without its password": {
			RedisAddrs: []string{env["HOTLIMIT_REDIS_SENTINEL_ADDR"]}, SentinelMaster: env["HOTLIMIT_REDIS_SENTINEL_MASTER"],
			RedisPassword: env["HOTLIMIT_REDIS_SENTINEL_MASTER_PASSWORD"],
		},
		"sentinel, master without its password": {
			RedisAddrs: []string{env["HOTLIMIT_REDIS_SENTINEL_ADDR"]}, SentinelMaster: env["HOTLIMIT_REDIS_SENTINEL_MASTER"],
			SentinelPassword: env["HOTLIMIT_REDIS_SENTINEL_PASSWORD"],
		},
		"sentinel, unknown master": {
			RedisAddrs: []string{env["HOTLIMIT_REDIS_SENTINEL_ADDR"]}, SentinelMaster: "nosuchmaster",
			SentinelPassword: env["HOTLIMIT_REDIS_SENTINEL_PASSWORD"], RedisPassword: env["HOTLIMIT_REDIS_SENTINEL_MASTER_PASSWORD"],
		},
	}
	for name, o := range bad {
		o.Kind, o.Timeout = Redis, slow
		s, err := Open(context.Background(), o, map[string]hotlimit.Policy{"a": frozen(1)})
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded, want it refused", name)
		} else if !strings.Contains(err.Error(), "does not answer") {
			t.Errorf("%s: %v, want Redis's refusal at Open", name, err)
		}
	}
}
