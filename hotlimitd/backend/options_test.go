package backend

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/redis/go-redis/v9"
)

// TestOpenRefuses: options that cannot work are refused with an error
// saying what is wrong, before any server is reached, and never panic.
func TestOpenRefuses(t *testing.T) {
	limits := map[string]hotlimit.Policy{"a": frozen(1)}
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ContextTimeoutEnabled: true})
	defer client.Close()
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Kind: "memcached"}, `unknown backend "memcached"`},
		{Options{Kind: "Redis"}, `unknown backend "Redis"`},
		{Options{Kind: Redis}, "needs a Redis address"},
		{Options{Kind: Lease}, "needs a Redis address"},
		{Options{Kind: Local, RedisAddrs: []string{"127.0.0.1:6379"}}, "local backend takes no Redis"},
		{Options{Cluster: true}, "local backend takes no Redis"},
		{Options{Kind: Redis, RedisAddrs: []string{"127.0.0.1"}}, `"127.0.0.1": want host:port`},
		{Options{Kind: Redis, RedisAddrs: []string{""}}, `"": want host:port`},
		{Options{Kind: Redis, RedisAddrs: []string{"redis:http"}}, `port "http" is not a number`},
		{Options{Kind: Redis, RedisAddrs: []string{"redis:0"}}, `port "0"`},
		{Options{Kind: Redis, RedisAddrs: []string{"redis:65536"}}, `port "65536"`},
		{Options{Kind: Redis, RedisAddrs: []string{"a:1", "b:2"}}, "2 Redis addresses without cluster or sentinel mode"},
		{Options{Kind: Redis, Cluster: true, SentinelMaster: "m", RedisAddrs: []string{"a:1"}}, "Sentinel and Cluster"},
		{Options{Kind: Redis, SentinelPassword: "p", RedisAddrs: []string{"a:1"}}, "need SentinelMaster"},
		{Options{Kind: Redis, Client: client, TLS: &tls.Config{}}, "a given Redis client takes no TLS"},
		{Options{Kind: Redis, Client: client, RedisPassword: "p"}, "a given Redis client takes no"},
		{Options{TLS: &tls.Config{}}, "local backend takes no TLS"},
		{Options{SentinelMaster: "m"}, "local backend takes no SentinelMaster"},
		{Options{Kind: Redis, Cluster: true, RedisAddrs: []string{"a:1", "b"}}, `"b": want host:port`},
		{Options{Kind: Redis, Cluster: true, RedisDB: 1, RedisAddrs: []string{"a:1"}}, "only database 0"},
		{Options{Kind: Redis, RedisDB: -1, RedisAddrs: []string{"a:1"}}, "database -1"},
		{Options{Kind: Redis, Client: client, RedisAddrs: []string{"a:1"}}, "not both"},
		{Options{Kind: Redis, Timeout: -time.Second, RedisAddrs: []string{"a:1"}}, "timeout -1s"},
		{Options{Kind: Lease, MaxLease: -1, RedisAddrs: []string{"a:1"}}, "max lease -1"},
		{Options{Kind: Lease, LeasePeriod: -1, RedisAddrs: []string{"a:1"}}, "lease period -1ns"},
		{Options{Prefix: "p:"}, "local backend takes no Prefix"},
		{Options{Kind: Local, Timeout: time.Second}, "local backend takes no Timeout"},
		{Options{MaxLease: 3}, "local backend takes no MaxLease"},
		{Options{Kind: Redis, SweepInterval: time.Second, RedisAddrs: []string{"a:1"}}, "redis backend takes no SweepInterval"},
		{Options{Kind: Lease, LocalOptions: []hotlimit.Option{hotlimit.WithMaxKeys(10)}, RedisAddrs: []string{"a:1"}}, "takes no LocalOptions"},
		{Options{Kind: Redis, Prefix: "{p}", RedisAddrs: []string{"a:1"}}, "contains a brace"},
		{Options{Kind: Redis, HashTag: "t}", RedisAddrs: []string{"a:1"}}, "contains a brace"},
	} {
		s, err := Open(context.Background(), c.o, limits)
		if err == nil {
			s.Close()
			t.Errorf("Open(%+v) accepted", c.o)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "backend: ") {
			t.Errorf("Open(%+v): %q; want it to say %q", c.o, err, c.want)
		}
	}
}

// TestOpenLocalRefusesPolicy: a bad policy is refused with the name of
// its limit.
func TestOpenLocalRefusesPolicy(t *testing.T) {
	_, err := Open(context.Background(), Options{}, map[string]hotlimit.Policy{"ok": frozen(1), "zero": hotlimit.FixedWindow{Window: time.Second}})
	if err == nil || !strings.Contains(err.Error(), `limit "zero"`) {
		t.Fatalf("Open: %v; want an error naming limit \"zero\"", err)
	}
}

// TestOpenUnreachable: a Redis that does not answer is an error at Open,
// naming the address, within the caller's deadline.
func TestOpenUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, kind := range []Kind{Redis, Lease} {
		_, err := Open(ctx, Options{Kind: kind, RedisAddrs: []string{addr}}, map[string]hotlimit.Policy{"a": frozen(1)})
		if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "does not answer") {
			t.Fatalf("%s on %s: %v; want an error saying Redis does not answer", kind, addr, err)
		}
	}
}

// TestOpenEmpty: a store with no limits opens, refuses every layer as of
// an unknown limit, and takes limits from an Update.
func TestOpenEmpty(t *testing.T) {
	s := open(t, Options{}, nil)
	if err := admitsOrErr(s); !errors.Is(err, admission.ErrUnknownLimit) {
		t.Fatalf("a layer of a store without limits: %v; want ErrUnknownLimit", err)
	}
	if err := s.Update(map[string]hotlimit.Policy{"a": frozen(1)}); err != nil {
		t.Fatal(err)
	}
	if err := admitsOrErr(s); err != nil {
		t.Fatal(err)
	}
}

// admitsOrErr decides one unit of key k under limit a, and returns the
// error.
func admitsOrErr(s *Store) error {
	_, err := s.Allow(context.Background(), []admission.Layer{{Limit: "a", Key: "k", Cost: 1}})
	return err
}
