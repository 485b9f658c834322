package redislimit

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A router sends a limiter's script calls to the node that holds their
// keys and names that node, for the per-node circuits and the hooks. One
// router serves every limiter on a client.
//
// On a *redis.ClusterClient it sends each call to the master of the
// call's slot itself (not through the cluster client's redirect loop,
// which also resends after a broken connection) and follows a MOVED or
// ASK reply: the script did not run on the node that sent it, so sending
// it where the reply points cannot consume twice. A MOVED reply also
// starts a reload of the cluster client's slot map.
//
// A call that fails to dial sent nothing, so it is sent again once on a
// spare client of the same node. Spare clients are the router's own, one
// per node address, made from the client's options on first use (without
// the client's hooks); their dialer never reports a failure to go-redis's
// pool (the failure surfaces on the connection's first use instead), so
// their pool never enters the back-off in which go-redis refuses to dial
// for about a second after PoolSize failed dials. That back-off would
// otherwise make the breaker's probes fail against a server that is back.
type router struct {
	single  *redis.Client        // the client, if it is one
	cluster *redis.ClusterClient // the client, if it is one
	addr    string               // single's address
	batch   *batcher             // single's decisions (see batch.go), or nil

	batches        sync.Map    // cluster's node address → *batcher (see batch.go)
	noClusterBatch atomic.Bool // the cluster's nodes cannot run clusterBatchScript

	mu     sync.Mutex
	spares map[string]*redis.Client // guarded by mu; never closed
}

// routers holds the router of every client a Limiter was made with.
var routers sync.Map // redis.Scripter → *router

func routerFor(client redis.Scripter) *router {
	if r, ok := routers.Load(client); ok {
		return r.(*router)
	}
	r := &router{spares: map[string]*redis.Client{}}
	switch c := client.(type) {
	case *redis.Client:
		r.single, r.addr = c, c.Options().Addr
		r.batch = &batcher{r: r, node: r.addr, turns: maxBatchesInFlight}
	case *redis.ClusterClient:
		r.cluster = c
	}
	actual, _ := routers.LoadOrStore(client, r)
	return actual.(*router)
}

// route returns the client to send a call on key to, and its node.
func (r *router) route(ctx context.Context, client redis.Scripter, key string) (redis.Scripter, string, error) {
	switch {
	case r.single != nil:
		return r.single, r.addr, nil
	case r.cluster != nil:
		c, err := r.cluster.MasterForKey(ctx, key)
		if err != nil {
			return nil, "", err
		}
		return c, c.Options().Addr, nil
	}
	return client, "", nil
}

// spare returns the router's spare client for the node at addr, or nil for
// a client that is neither a *redis.Client nor a *redis.ClusterClient.
func (r *router) spare(addr string) *redis.Client {
	if r.single == nil && r.cluster == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.spares[addr]; c != nil {
		return c
	}
	var o redis.Options
	if r.single != nil {
		o = *r.single.Options()
	} else {
		co := r.cluster.Options()
		o = redis.Options{
			ClientName: co.ClientName, Dialer: co.Dialer, OnConnect: co.OnConnect,
			Protocol: co.Protocol, Username: co.Username, Password: co.Password,
			CredentialsProvider: co.CredentialsProvider, CredentialsProviderContext: co.CredentialsProviderContext,
			DialTimeout: co.DialTimeout, ReadTimeout: co.ReadTimeout, WriteTimeout: co.WriteTimeout,
			ContextTimeoutEnabled: co.ContextTimeoutEnabled, PoolSize: co.PoolSize, PoolTimeout: co.PoolTimeout,
			DisableIdentity: co.DisableIdentity, IdentitySuffix: co.IdentitySuffix, TLSConfig: co.TLSConfig,
		}
	}
	o.Addr = addr
	o.MaxRetries = -1
	o.Dialer = neverFailDialer(o.Dialer, o.DialTimeout, o.TLSConfig)
	c := redis.NewClient(&o)
	r.spares[addr] = c
	return c
}

// neverFailDialer wraps dial (a default one when nil) so that a failed
// dial returns a connection whose every use fails with the dial's error.
func neverFailDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error), timeout time.Duration, tc *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := &net.Dialer{Timeout: timeout, KeepAlive: 5 * time.Minute}
			if tc != nil {
				return (&tls.Dialer{NetDialer: d, Config: tc}).DialContext(ctx, network, addr)
			}
			return d.DialContext(ctx, network, addr)
		}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return failedConn{err}, nil
		}
		return c, nil
	}
}

// failedConn is a connection that was never made: every use fails with
// the dial's error.
type failedConn struct{ err error }

func (c failedConn) Read([]byte) (int, error)         { return 0, c.err }
func (c failedConn) Write([]byte) (int, error)        { return 0, c.err }
func (c failedConn) Close() error                     { return nil }
func (c failedConn) LocalAddr() net.Addr              { return nil }
func (c failedConn) RemoteAddr() net.Addr             { return nil }
func (c failedConn) SetDeadline(time.Time) error      { return nil }
func (c failedConn) SetReadDeadline(time.Time) error  { return nil }
func (c failedConn) SetWriteDeadline(time.Time) error { return nil }

// notSent reports whether err says the call never left this process: a
// failed dial.
func notSent(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// maxRedirects bounds the MOVED and ASK replies one call follows.
const maxRedirects = 3

// send makes the script call for keys and args on c, the client of node
// as route returned them, following redirections and resending once after
// a failed dial (see router), and reports each attempt to h.
func (r *router) send(ctx context.Context, s *luaScript, c redis.Scripter, node string, h *Hooks, keys []string, args []any) ([]any, error) {
	var err error
	asking, resent := false, false
	for redirects := 0; ; {
		start := time.Now()
		var vals []any
		if asking {
			vals, err = evalAsking(ctx, s.src, c.(*redis.Client), keys, args)
		} else {
			vals, err = s.Run(ctx, c, keys, args...).Slice()
		}
		reportCall(h, node, time.Since(start), err)
		if err == nil {
			return vals, nil
		}
		if redirects < maxRedirects && r.cluster != nil {
			if addr, ok := redis.IsMovedError(err); ok {
				r.cluster.ReloadState(ctx)
				c, node, asking = r.spare(addr), addr, false
				redirects++
				continue
			}
			if addr, ok := redis.IsAskError(err); ok {
				c, node, asking = r.spare(addr), addr, true
				redirects++
				continue
			}
		}
		if !resent && notSent(err) && ctx.Err() == nil {
			if s := r.spare(node); s != nil {
				c, resent = s, true
				continue
			}
		}
		return nil, err
	}
}

// evalAsking sends ASKING and the script on one connection of c, as a
// node importing a slot requires for the keys it is receiving.
func evalAsking(ctx context.Context, src string, c *redis.Client, keys []string, args []any) ([]any, error) {
	var cmd *redis.Cmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "asking")
		cmd = p.Eval(ctx, src, keys, args...)
		return nil
	})
	if cmd != nil && cmd.Err() != nil {
		return nil, cmd.Err()
	}
	if err != nil {
		return nil, err
	}
	return cmd.Slice()
}

func reportCall(h *Hooks, node string, took time.Duration, err error) {
	if h != nil && h.Call != nil {
		h.Call(node, took, err)
	}
}
