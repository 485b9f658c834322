package bench

import (
	"context"
	"errors"
	"io"

	guber "github.com/gubernator-io/gubernator/v2"
	"github.com/sirupsen/logrus"
)

// StartGubernator starts one gubernator v2 daemon in process, as its
// cmd/gubernator does (gRPC with its Prometheus and OpenTelemetry stats
// handlers, the HTTP gateway), on free loopback ports, with no peer
// discovery and itself as its only peer: every key is its own, so each
// decision is made in its cache by its worker pool, exactly. workers is
// its worker pool's size (0: one per CPU). Close the daemon when done. Its
// logs go nowhere below warnings.
func StartGubernator(ctx context.Context, workers int) (d *guber.Daemon, addr string, err error) {
	ds, addrs, err := StartGubernatorCluster(ctx, 1, workers)
	if err != nil {
		return nil, "", err
	}
	return ds[0], addrs[0], nil
}

// StartGubernatorCluster starts n daemons as StartGubernator does, each
// told that the n are its peers: each key is owned by one of them, and a
// request for a key another node owns is forwarded to it (batched unless
// the request says NO_BATCHING), except with GLOBAL, where the node that
// receives it answers from its own copy. It returns the daemons and their
// gRPC addresses; close every daemon when done.
func StartGubernatorCluster(ctx context.Context, n, workers int) (ds []*guber.Daemon, addrs []string, err error) {
	if n < 1 {
		return nil, nil, errors.New("bench: a gubernator cluster needs at least one node")
	}
	defer func() {
		if err != nil {
			for _, d := range ds {
				d.Close()
			}
		}
	}()
	log := logrus.New()
	log.SetOutput(io.Discard)
	log.SetLevel(logrus.WarnLevel)
	var peers []guber.PeerInfo
	for range n {
		d, err := guber.SpawnDaemon(ctx, guber.DaemonConfig{
			GRPCListenAddress: "127.0.0.1:0",
			HTTPListenAddress: "127.0.0.1:0",
			PeerDiscoveryType: "none",
			Workers:           workers,
			Logger:            logrus.NewEntry(log),
		})
		if err != nil {
			return nil, nil, err
		}
		ds = append(ds, d)
		addr := d.GRPCListeners[0].Addr().String()
		addrs = append(addrs, addr)
		d.PeerInfo = guber.PeerInfo{GRPCAddress: addr, HTTPAddress: d.HTTPListener.Addr().String()}
		peers = append(peers, d.PeerInfo)
	}
	for i, d := range ds {
		own := make([]guber.PeerInfo, n)
		copy(own, peers)
		own[i].IsOwner = true
		d.V1Server.SetPeers(own)
	}
	return ds, addrs, nil
}
