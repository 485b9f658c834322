package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd/backend"
	"github.com/hotlimit/hotlimit/redislimit"
)

// store is the backend the command runs (a *backend.Store): it decides,
// follows the configuration's limits across reloads, and closes.
type store interface {
	admission.Backend
	Reload(limits map[string]hotlimit.Policy, publish func()) error
}

// defaultMaxKeys bounds each limit of the in-process backend by default, so
// that a flood of distinct descriptor values (one key each) cannot grow the
// service's memory without bound.
const defaultMaxKeys = 1_000_000

// defaultRedisTimeout bounds each call to Redis by default: well above a
// pause of Redis of a few hundred milliseconds (a fork for a snapshot, a
// failover, a slow command of another client), so that a slow server is
// not taken for a dead one and the breaker does not open on it.
const defaultRedisTimeout = 2 * time.Second

// The breaker flags' defaults: those of the breaker redislimit gives a
// limiter of its own (redislimit.NewBreaker(5, time.Second)).
const (
	defaultBreakerFailures = 5
	defaultBreakerOpen     = time.Second
)

// openStore opens the backend -backend names.
func openStore(ctx context.Context, f *flags, limits map[string]hotlimit.Policy) (store, error) {
	o := backend.Options{
		Kind:    backend.Kind(f.backend),
		Cluster: f.redisCluster,
		HashTag: f.redisHashTag,
		Prefix:  f.redisPrefix,
	}
	var err error
	switch o.Kind {
	case backend.Local:
		err = localOptions(f, &o)
	case backend.Redis, backend.Lease:
		err = redisOptions(f, &o)
	default:
		return nil, fmt.Errorf("-backend %q: want local, redis or lease", f.backend)
	}
	if err != nil {
		return nil, err
	}
	s, err := backend.Open(ctx, o, limits)
	if err != nil {
		return nil, fmt.Errorf("-backend %s: %w", f.backend, err)
	}
	return s, nil
}

// localOptions checks the flags of -backend local (no Redis flag) and
// sets o's from them.
func localOptions(f *flags, o *backend.Options) error {
	if f.redis != "" || f.redisCluster || f.redisHashTag != "" || f.redisPrefix != "" || f.redisSec != (redisSecurity{}) {
		return fmt.Errorf("-backend local takes no -redis flag")
	}
	if f.redisTimeout != defaultRedisTimeout || f.breakFailures != defaultBreakerFailures || f.breakOpen != defaultBreakerOpen || f.localDenials != 0 {
		return fmt.Errorf("-redis-timeout, -redis-breaker-failures, -redis-breaker-open and -redis-local-denials are for -backend redis or lease")
	}
	switch {
	case f.maxKeys < 0:
		return fmt.Errorf("-max-keys %d: want 0 (no bound) or more", f.maxKeys)
	case f.maxKeys > 0:
		o.LocalOptions = []hotlimit.Option{hotlimit.WithMaxKeys(f.maxKeys)}
	}
	return nil
}

// redisOptions checks the flags of -backend redis or lease and sets o's
// from them; an error names the flag at fault.
func redisOptions(f *flags, o *backend.Options) error {
	if f.maxKeys != defaultMaxKeys {
		return fmt.Errorf("-max-keys is for -backend local: Redis expires idle keys itself")
	}
	for _, a := range strings.Split(f.redis, ",") {
		if a = strings.TrimSpace(a); a != "" {
			o.RedisAddrs = append(o.RedisAddrs, a)
		}
	}
	if len(o.RedisAddrs) == 0 {
		return fmt.Errorf("-backend %s needs -redis host:port", f.backend)
	}
	if strings.ContainsAny(f.redisPrefix, "{}") {
		// A brace would choose the Redis Cluster slot of the keys.
		return fmt.Errorf("-redis-prefix %q: a prefix has no brace ({ or })", f.redisPrefix)
	}
	if err := f.redisSec.apply(o); err != nil {
		return err
	}
	switch {
	case f.redisTimeout <= 0:
		return fmt.Errorf("-redis-timeout %v: want a duration above 0", f.redisTimeout)
	case f.breakFailures < 1:
		return fmt.Errorf("-redis-breaker-failures %d: want 1 or more", f.breakFailures)
	case f.breakOpen <= 0:
		return fmt.Errorf("-redis-breaker-open %v: want a duration above 0", f.breakOpen)
	case f.localDenials < 0:
		return fmt.Errorf("-redis-local-denials %d: want 0 (off) or more", f.localDenials)
	case f.localDenials > 0 && o.Kind == backend.Lease:
		return fmt.Errorf("-redis-local-denials is for -backend redis: a lease decides in process already")
	}
	o.Timeout = f.redisTimeout
	// One breaker for every limit: they share the client, and a node
	// that fails fails them all.
	o.RedisOptions = []redislimit.Option{redislimit.WithBreaker(redislimit.NewBreaker(f.breakFailures, f.breakOpen))}
	if f.localDenials > 0 {
		o.RedisOptions = append(o.RedisOptions, redislimit.WithLocalDenials(f.localDenials))
	}
	return nil
}

// The environment variables that may hold the Redis passwords (a flag's
// value would show in ps).
const (
	redisPasswordEnv         = "HOTLIMITD_REDIS_PASSWORD"
	redisSentinelPasswordEnv = "HOTLIMITD_REDIS_SENTINEL_PASSWORD"
)

// apply sets o's TLS, AUTH and Sentinel options from the flags and the
// password variables; an error names the flag at fault.
func (r *redisSecurity) apply(o *backend.Options) error {
	var err error
	o.RedisUsername = r.username
	if o.RedisPassword, err = password("-redis-password-file", r.passwordFile, redisPasswordEnv); err != nil {
		return err
	}
	if r.sentinel == "" && (r.sentinelUser != "" || r.sentinelPassFile != "") {
		return fmt.Errorf("-redis-sentinel-username and -redis-sentinel-password-file need -redis-sentinel")
	}
	if r.sentinel != "" {
		if o.Cluster {
			return fmt.Errorf("-redis-sentinel and -redis-cluster exclude each other")
		}
		o.SentinelMaster, o.SentinelUsername = r.sentinel, r.sentinelUser
		if o.SentinelPassword, err = password("-redis-sentinel-password-file", r.sentinelPassFile, redisSentinelPasswordEnv); err != nil {
			return err
		}
	}
	if !r.tls {
		if r.tlsCA != "" || r.tlsCert != "" || r.tlsKey != "" || r.tlsServerName != "" {
			return fmt.Errorf("-redis-tls-ca, -redis-tls-cert, -redis-tls-key and -redis-tls-server-name need -redis-tls")
		}
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.tlsServerName}
	if r.tlsCA != "" {
		b, err := os.ReadFile(r.tlsCA)
		if err != nil {
			return fmt.Errorf("-redis-tls-ca: %w", err)
		}
		if cfg.RootCAs, err = certPool(b); err != nil {
			return fmt.Errorf("-redis-tls-ca %s: %w", r.tlsCA, err)
		}
	}
	if (r.tlsCert == "") != (r.tlsKey == "") {
		return fmt.Errorf("-redis-tls-cert and -redis-tls-key go together")
	}
	if r.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(r.tlsCert, r.tlsKey)
		if err != nil {
			return fmt.Errorf("-redis-tls-cert %s, -redis-tls-key %s: %w", r.tlsCert, r.tlsKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	o.TLS = cfg
	return nil
}

// password returns the secret of the file flag name names, or else the
// environment variable env's value ("" when neither is set); both at once
// is an error.
func password(name, file, env string) (string, error) {
	v := os.Getenv(env)
	if file == "" {
		return v, nil
	}
	if v != "" {
		return "", fmt.Errorf("give %s or $%s, not both", name, env)
	}
	b, err := secretFile(name, file)
	return string(b), err
}
