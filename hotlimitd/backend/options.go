package backend

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/redis/go-redis/v9"
)

// Kind names where a Store keeps its limits.
type Kind string

// The kinds of Store.
const (
	// Local keeps every limit in this process (hotlimit limiters): the
	// fastest, and exact, for one replica only.
	Local Kind = "local"
	// Redis decides every request in Redis or a Redis Cluster, one
	// script call per request (redislimit): exact across replicas.
	Redis Kind = "redis"
	// Lease decides in process from units leased from the same Redis
	// state (redislimit.WithLeases): in-process speed across replicas, never
	// more than the limit in total, but not exact (see the package doc).
	Lease Kind = "lease"
)

// Options says which Store Open builds. The zero value is a Local store
// with hotlimit's default limiter options.
type Options struct {
	// Kind is Local (the default when empty), Redis or Lease.
	Kind Kind

	// RedisAddrs is the host:port of the Redis server, or, with Cluster,
	// of one or more nodes of the Redis Cluster (the client finds the
	// others). Redis and Lease need it (or Client); Local takes none.
	RedisAddrs []string
	// Cluster says RedisAddrs are Redis Cluster nodes.
	Cluster bool
	// RedisUsername and RedisPassword authenticate to Redis (AUTH): the
	// password alone is requirepass's (the default user), both are an
	// ACL user's. A Sentinel's master is authenticated with them too.
	RedisUsername, RedisPassword string
	// TLS, when set, is the TLS configuration of every connection to
	// Redis (a server's tls-port: its CA, and a client certificate when
	// it has tls-auth-clients), the Sentinels' too with SentinelMaster.
	TLS *tls.Config
	// SentinelMaster, when set, says that RedisAddrs are Redis Sentinels
	// and names the master they monitor: the Store decides on the master
	// they report, and follows it when they fail over to a replica. Redis
	// replicates asynchronously, so a failover can lose the counts the
	// old master had not replicated: exactness holds on one master. Not
	// with Cluster.
	SentinelMaster string
	// SentinelUsername and SentinelPassword authenticate to the
	// Sentinels (their own requirepass or ACL user), not to the master.
	SentinelUsername, SentinelPassword string
	// RedisDB selects the database of a single server (a Cluster has
	// only database 0).
	RedisDB int
	// Client, instead of RedisAddrs, is a client the caller built (a
	// Ring, its own pool sizes). It must not retry commands and must
	// apply context deadlines, as redislimit.New requires, and the
	// Store does not close it.
	Client redis.Scripter

	// Prefix starts every Redis key (default "hotlimit:", redislimit's).
	// Replicas share a limit's state when they use the same Redis, the
	// same Prefix and HashTag, and the same limit name.
	Prefix string
	// HashTag, when set, puts every key of every limit in one Redis
	// Cluster slot (see redislimit.WithHashTag). A request whose
	// descriptors have different keys is one script call, which on a
	// Cluster must name keys of one slot: without a HashTag such a
	// request fails with an error wrapping redislimit.ErrCrossSlot
	// (requests of one descriptor, or of descriptors with the same
	// key, spread over the Cluster). With it, every key lives on one
	// master.
	HashTag string
	// Timeout bounds each call to Redis, a lease's takes and give-backs
	// included (default 100ms, redislimit's). A call that
	// times out may have consumed quota; it is never retried.
	Timeout time.Duration
	// RedisOptions are given to every redislimit.Limiter after the
	// Store's own (WithHooks, WithLocalDenials, WithBreaker, ...).
	RedisOptions []redislimit.Option

	// MaxLease bounds the units one replica holds unspent per key in
	// Lease mode (default: a tenth of the limit, at least 1): with n
	// replicas, at most n·MaxLease units of a key's budget are debited
	// in Redis but not yet spent.
	MaxLease int64
	// LeasePeriod is how long a lease should last at a key's recent
	// rate (default 100ms; see redislimit.WithLeases).
	LeasePeriod time.Duration
	// SweepInterval is how often a Lease store gives back the leases
	// of keys idle since the previous sweep (default 1s; < 0 never).
	SweepInterval time.Duration

	// LocalOptions are given to every hotlimit.Limiter of a Local store
	// (hotlimit.WithMaxKeys, hotlimit.WithClock, ...).
	LocalOptions []hotlimit.Option
}

// DefaultSweepInterval is how often a Lease store gives back idle
// leases unless Options.SweepInterval says otherwise.
const DefaultSweepInterval = time.Second

// check returns an error naming the first option that does not fit the
// kind, or nil. It reaches no server.
func (o *Options) check() error {
	switch o.Kind {
	case "", Local:
		return o.checkLocal()
	case Redis, Lease:
	default:
		return fmt.Errorf("backend: unknown backend %q (want local, redis or lease)", o.Kind)
	}
	if len(o.LocalOptions) > 0 {
		return fmt.Errorf("backend: the %s backend takes no LocalOptions", o.Kind)
	}
	if f := o.set(leaseFields); f != "" && o.Kind != Lease {
		return fmt.Errorf("backend: the redis backend takes no %s (a lease option)", f)
	}
	for _, step := range []func() error{o.checkClient, o.checkTopology, o.checkValues} {
		if err := step(); err != nil {
			return err
		}
	}
	for _, a := range o.RedisAddrs {
		if err := checkAddr(a); err != nil {
			return err
		}
	}
	return nil
}

// checkLocal checks a Local store's options: no Redis option, no lease
// option.
func (o *Options) checkLocal() error {
	if len(o.RedisAddrs) > 0 || o.Client != nil || o.Cluster {
		return errors.New("backend: the local backend takes no Redis address, client or cluster")
	}
	if f := o.set(redisFields); f != "" {
		return fmt.Errorf("backend: the local backend takes no %s (a Redis option)", f)
	}
	if f := o.set(leaseFields); f != "" {
		return fmt.Errorf("backend: the local backend takes no %s (a lease option)", f)
	}
	return nil
}

// checkClient checks that a Redis or Lease store is given a client or
// addresses, and that a given client comes without connection options.
func (o *Options) checkClient() error {
	switch {
	case o.Client != nil && len(o.RedisAddrs) > 0:
		return errors.New("backend: give a Redis client or Redis addresses, not both")
	case o.Client == nil && len(o.RedisAddrs) == 0:
		return fmt.Errorf("backend: the %s backend needs a Redis address", o.Kind)
	case o.Client != nil && (o.TLS != nil || o.SentinelMaster != "" || o.RedisUsername != "" || o.RedisPassword != ""):
		return errors.New("backend: a given Redis client takes no TLS, SentinelMaster, RedisUsername or RedisPassword: configure the client")
	}
	return nil
}

// checkTopology checks that the addresses, Cluster, Sentinel and database
// options describe one server, a Cluster or Sentinels.
func (o *Options) checkTopology() error {
	switch {
	case o.Cluster && o.SentinelMaster != "":
		return errors.New("backend: Sentinel and Cluster exclude each other: a Cluster fails over by itself")
	case o.SentinelMaster == "" && (o.SentinelUsername != "" || o.SentinelPassword != ""):
		return errors.New("backend: SentinelUsername and SentinelPassword need SentinelMaster")
	case o.Client == nil && !o.Cluster && o.SentinelMaster == "" && len(o.RedisAddrs) > 1:
		return fmt.Errorf("backend: %d Redis addresses without cluster or sentinel mode: give one server, the nodes of a Redis Cluster, or Sentinels", len(o.RedisAddrs))
	case o.Cluster && o.RedisDB != 0:
		return fmt.Errorf("backend: a Redis Cluster has only database 0, got %d", o.RedisDB)
	case o.RedisDB < 0:
		return fmt.Errorf("backend: Redis database %d < 0", o.RedisDB)
	}
	return nil
}

// checkValues checks the key and lease options' values.
func (o *Options) checkValues() error {
	switch {
	case strings.ContainsAny(o.Prefix, "{}"):
		return fmt.Errorf("backend: key prefix %q contains a brace", o.Prefix)
	case strings.ContainsAny(o.HashTag, "{}"):
		return fmt.Errorf("backend: hash tag %q contains a brace", o.HashTag)
	case o.Timeout < 0:
		return fmt.Errorf("backend: timeout %v < 0", o.Timeout)
	case o.MaxLease < 0:
		return fmt.Errorf("backend: max lease %d < 0", o.MaxLease)
	case o.LeasePeriod < 0:
		return fmt.Errorf("backend: lease period %v < 0", o.LeasePeriod)
	}
	return nil
}

// The options of one kind only, by name, for check's errors.
var (
	redisFields = map[string]func(*Options) bool{
		"RedisUsername":    func(o *Options) bool { return o.RedisUsername != "" },
		"RedisPassword":    func(o *Options) bool { return o.RedisPassword != "" },
		"TLS":              func(o *Options) bool { return o.TLS != nil },
		"SentinelMaster":   func(o *Options) bool { return o.SentinelMaster != "" },
		"SentinelUsername": func(o *Options) bool { return o.SentinelUsername != "" },
		"SentinelPassword": func(o *Options) bool { return o.SentinelPassword != "" },
		"RedisDB":          func(o *Options) bool { return o.RedisDB != 0 },
		"Prefix":           func(o *Options) bool { return o.Prefix != "" },
		"HashTag":          func(o *Options) bool { return o.HashTag != "" },
		"Timeout":          func(o *Options) bool { return o.Timeout != 0 },
		"RedisOptions":     func(o *Options) bool { return len(o.RedisOptions) > 0 },
	}
	leaseFields = map[string]func(*Options) bool{
		"MaxLease":      func(o *Options) bool { return o.MaxLease != 0 },
		"LeasePeriod":   func(o *Options) bool { return o.LeasePeriod != 0 },
		"SweepInterval": func(o *Options) bool { return o.SweepInterval != 0 },
	}
)

// set returns the first name, in order, of fields that o sets, or "".
func (o *Options) set(fields map[string]func(*Options) bool) string {
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if fields[name](o) {
			return name
		}
	}
	return ""
}

// checkAddr returns an error unless a is host:port with a port in
// 1..65535.
func checkAddr(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("backend: Redis address %q: want host:port", a)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("backend: Redis address %q: port %q is not a number in 1..65535", a, port)
	}
	return nil
}

// newClient returns a go-redis client for o's addresses, configured as
// redislimit requires: no retries (a retried call could consume twice),
// context deadlines applied, and on a Cluster no resending on another
// node.
func (o *Options) newClient() redis.UniversalClient {
	if o.Cluster {
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: o.RedisAddrs, Username: o.RedisUsername, Password: o.RedisPassword, TLSConfig: o.TLS,
			MaxRetries: -1, MaxRedirects: -1, ContextTimeoutEnabled: true, DisableIdentity: true,
		})
	}
	if o.SentinelMaster != "" {
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: o.SentinelMaster, SentinelAddrs: o.RedisAddrs,
			SentinelUsername: o.SentinelUsername, SentinelPassword: o.SentinelPassword,
			Username: o.RedisUsername, Password: o.RedisPassword, DB: o.RedisDB, TLSConfig: o.TLS,
			MaxRetries: -1, ContextTimeoutEnabled: true, DisableIdentity: true,
		})
	}
	return redis.NewClient(&redis.Options{
		Addr: o.RedisAddrs[0], Username: o.RedisUsername, Password: o.RedisPassword, DB: o.RedisDB, TLSConfig: o.TLS,
		MaxRetries: -1, ContextTimeoutEnabled: true, DisableIdentity: true,
	})
}
