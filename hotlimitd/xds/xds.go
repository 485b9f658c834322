// Package xds subscribes hotlimitd to its rate limit configuration over
// xDS, as envoyproxy/ratelimit does with CONFIG_TYPE=GRPC_XDS_SOTW (the
// way Envoy Gateway configures its rate limit service): a Client opens
// one Aggregated Discovery Service stream to a control plane, State of
// the World, for the RateLimitConfig resources of go-control-plane's
// ratelimit module (TypeURL), and turns every response into one
// config.Config.
//
// # What a response does
//
// A response holds every RateLimitConfig of the node (State of the
// World): each is a domain and its descriptor rules, the fields of
// envoyproxy/ratelimit's YAML, and together they are the whole
// configuration, as the files of a directory are. Each resource is
// converted to that YAML (ToYAML) and the set is read by
// config.ParseFiles, under the name "xds:" and the resource's name: the
// same validation as a file (a domain in one resource only, unless
// Options.LoadOptions has config.MergeDomains), the same limit names (a limit keeps its
// state across a reload, and across a move from files to xDS, while its
// place in the tree and its policy stay; see config.Limit.Name).
//
// A response whose resources do not convert or do not load, or that
// Options.Apply refuses (a backend that cannot take its limits), is
// NACKed with the error, and the running configuration is kept; one that
// Apply takes is ACKed. A control plane that sends the refused resources
// again (go-control-plane's snapshot cache does, at once) is NACKed again
// after a backoff (as between streams), without a new report, until it
// sends others. A response of no resources is an empty
// configuration (no domain: every descriptor is answered OK without a
// limit), as the control plane says.
//
// # Connection
//
// When the stream fails or ends (the control plane restarts, the
// network drops), the Client keeps the running configuration and opens
// a new stream after a backoff, doubled after each failure from
// Options.MinBackoff to Options.MaxBackoff, with jitter, and back to
// MinBackoff once a stream has delivered a response. The control plane
// sends the current resources on every new stream.
//
// # Where it differs from envoyproxy/ratelimit
//
// envoyproxy/ratelimit ACKs a response before the configuration is
// applied; here the ACK follows Apply, so that a control plane sees a
// NACK when the backend refuses the limits too. It sends node metadata
// and extra gRPC headers from its settings; a Client sends the node
// Options.Node describes, and the connection is the caller's (TLS,
// headers: grpc.DialOption). Its delta xDS is not supported either.
package xds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/client/sotw/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// TypeURL is the type of the resources a Client subscribes to.
const TypeURL = resource.RateLimitConfigType

// The default backoff between two streams.
const (
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
)

// Options configure a Client. Conn and Apply are required.
type Options struct {
	// Conn is the connection to the control plane (grpc.NewClient),
	// which the Client does not close.
	Conn grpc.ClientConnInterface
	// Node identifies this service to the control plane: its Id is the
	// node a snapshot is set for (envoyproxy/ratelimit's
	// CONFIG_GRPC_XDS_NODE_ID). Nil is a node of Id "default".
	Node *corev3.Node
	// Apply makes cfg the running configuration, or returns why it
	// cannot (the response is then NACKed with the error). It is called
	// from Run's goroutine, one response at a time.
	Apply func(cfg *config.Config) error
	// OnRefused, when set, is told why each response was NACKed (once
	// for resources sent again unchanged). Streams that fail are logged.
	OnRefused func(error)
	// LoadOptions are given to config.ParseFiles (config.MergeDomains:
	// several resources may hold one domain).
	LoadOptions []config.LoadOption
	// Logger logs the streams opened and lost (default: slog.Default()).
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the wait before a new stream
	// (defaults DefaultMinBackoff and DefaultMaxBackoff).
	MinBackoff, MaxBackoff time.Duration
}

// A Client keeps a configuration current from a control plane. Run it
// once; its methods are not for concurrent use.
type Client struct {
	o Options
}

// New returns a Client, or an error naming the option that does not fit.
func New(o Options) (*Client, error) {
	switch {
	case o.Conn == nil:
		return nil, errors.New("xds: Options.Conn is required")
	case o.Apply == nil:
		return nil, errors.New("xds: Options.Apply is required")
	case o.MinBackoff < 0 || o.MaxBackoff < 0:
		return nil, fmt.Errorf("xds: backoff %v..%v must not be negative", o.MinBackoff, o.MaxBackoff)
	}
	if o.Node == nil {
		o.Node = &corev3.Node{Id: "default"}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		return nil, fmt.Errorf("xds: MaxBackoff %v < MinBackoff %v", o.MaxBackoff, o.MinBackoff)
	}
	return &Client{o: o}, nil
}

// Run subscribes until ctx is done, opening a new stream after a backoff
// whenever one fails.
func (c *Client) Run(ctx context.Context) {
	wait := c.o.MinBackoff
	for {
		got, err := c.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		if got {
			wait = c.o.MinBackoff
		}
		c.o.Logger.Warn("xDS: the stream to the control plane ended, the running configuration is kept", "err", err.Error(), "retry_in", wait.String())
		// Jitter in [wait/2, wait], so that replicas cut off together do
		// not come back together.
		if !sleep(ctx, wait/2+rand.N(wait/2+1)) {
			return
		}
		wait = min(2*wait, c.o.MaxBackoff)
	}
}

// stream runs one ADS stream until it fails, and reports whether it
// delivered a response.
func (c *Client) stream(ctx context.Context) (got bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream
	ads := sotw.NewADSClient(ctx, c.o.Node, TypeURL)
	if err := ads.InitConnect(c.o.Conn); err != nil {
		return false, err
	}
	var (
		refused  []*anypb.Any // the resources NACKed last
		nackErr  error        // why
		nackWait time.Duration
	)
	for {
		resp, err := ads.Fetch()
		if err != nil {
			return got, err
		}
		got = true
		if refused != nil && sameResources(resp.Resources, refused) {
			// A control plane sends a NACKed version again at once (go-
			// control-plane's snapshot cache does: the version differs
			// from the one ACKed); it is NACKed again, told once, after
			// a backoff, so that the two do not spin.
			if !sleep(ctx, nackWait) {
				return got, ctx.Err()
			}
			nackWait = min(2*nackWait, c.o.MaxBackoff)
			if err := ads.Nack(nackErr.Error()); err != nil {
				return got, err
			}
			continue
		}
		cfg, err := Parse(resp.Resources, c.o.LoadOptions...)
		if err == nil {
			err = c.o.Apply(cfg)
		}
		if err != nil {
			refused, nackErr, nackWait = resp.Resources, err, c.o.MinBackoff
			if c.o.OnRefused != nil {
				c.o.OnRefused(fmt.Errorf("xds: response refused (NACK): %w", err))
			}
			err = ads.Nack(err.Error())
		} else {
			refused = nil
			err = ads.Ack()
		}
		if err != nil {
			return got, err
		}
	}
}

// sameResources reports whether a and b hold the same resources, in any
// order (a control plane may send them in another: go-control-plane's
// snapshot keeps them in a map).
func sameResources(a, b []*anypb.Any) bool {
	return slices.EqualFunc(sorted(a), sorted(b), func(x, y *anypb.Any) bool { return proto.Equal(x, y) })
}

// sorted returns rs sorted by type and bytes.
func sorted(rs []*anypb.Any) []*anypb.Any {
	return slices.SortedFunc(slices.Values(rs), func(x, y *anypb.Any) int {
		if c := strings.Compare(x.GetTypeUrl(), y.GetTypeUrl()); c != 0 {
			return c
		}
		return bytes.Compare(x.GetValue(), y.GetValue())
	})
}

// sleep waits d, and reports whether ctx was not done first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Parse returns the configuration of one response's resources, each a
// RateLimitConfig, or every error, each naming its resource.
func Parse(resources []*anypb.Any, opts ...config.LoadOption) (*config.Config, error) {
	files := make([]config.File, 0, len(resources))
	var errs []error
	for i, r := range resources {
		var rc rlsconfv3.RateLimitConfig
		if err := r.UnmarshalTo(&rc); err != nil {
			errs = append(errs, fmt.Errorf("xds: resource %d (%s): %w", i, r.GetTypeUrl(), err))
			continue
		}
		data, err := ToYAML(&rc)
		if err != nil {
			errs = append(errs, fmt.Errorf("xds: resource %d %q: %w", i, rc.GetName(), err))
			continue
		}
		files = append(files, config.File{Name: "xds:" + rc.GetName(), Data: data})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// In name order, as a directory's files are read: the errors of one
	// set of resources are the same in whatever order they came.
	slices.SortStableFunc(files, func(a, b config.File) int { return strings.Compare(a.Name, b.Name) })
	return config.ParseFiles(files, opts...)
}
