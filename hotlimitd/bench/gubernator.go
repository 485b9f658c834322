package bench

import (
	"context"
	"io"

	guber "github.com/gubernator-io/gubernator/v2"
	"github.com/sirupsen/logrus"
)

// StartGubernator starts one gubernator v2 daemon in process, as its
// cmd/gubernator does (gRPC with its Prometheus and OpenTelemetry stats
// handlers, the HTTP gateway), on free loopback ports, with no peer
// discovery and itself as its only peer: every key is its own, so each
// decision is made in its cache by its worker pool, exactly. Close the
// daemon when done. Its logs go nowhere below warnings.
func StartGubernator(ctx context.Context, workers int) (d *guber.Daemon, addr string, err error) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	log.SetLevel(logrus.WarnLevel)
	d, err = guber.SpawnDaemon(ctx, guber.DaemonConfig{
		GRPCListenAddress: "127.0.0.1:0",
		HTTPListenAddress: "127.0.0.1:0",
		PeerDiscoveryType: "none",
		Workers:           workers,
		Logger:            logrus.NewEntry(log),
	})
	if err != nil {
		return nil, "", err
	}
	addr = d.GRPCListeners[0].Addr().String()
	d.PeerInfo = guber.PeerInfo{GRPCAddress: addr, HTTPAddress: d.HTTPListener.Addr().String(), IsOwner: true}
	d.SetPeers([]guber.PeerInfo{d.PeerInfo})
	return d, addr, nil
}
