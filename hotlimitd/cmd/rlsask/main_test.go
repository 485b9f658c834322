package main

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"google.golang.org/grpc"
)

// TestAsk: rlsask against a hotlimitd on the built-in configuration
// prints one line per answer, with each descriptor's state.
func TestAsk(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte("domain: hotlimitd\ndescriptors:\n  - key: generic_key\n    rate_limit:\n      unit: hour\n      requests_per_unit: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	local, err := admission.LocalBackend()(cfg.Limits())
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	srv, err := hotlimitd.New(hotlimitd.Options{Config: func() *config.Config { return cfg }, Backend: local})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	go g.Serve(lis)
	defer g.Stop()
	var out bytes.Buffer
	if err := run([]string{"-addr", lis.Addr().String(), "-n", "3", "generic_key=demo", "other=x"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"OK | generic_key=demo OK 1 left of 2/hour, reset in ",
		"OK | generic_key=demo OK 0 left of 2/hour, reset in ",
		"OVER_LIMIT | generic_key=demo OVER_LIMIT 0 left of 2/hour, reset in ",
	}
	if len(lines) != 3 {
		t.Fatalf("output %q", out.String())
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, want[i]) || !strings.HasSuffix(l, " | other=x OK (no limit)") {
			t.Errorf("line %d: %q, want %q... | other=x OK (no limit)", i, l, want[i])
		}
	}
	for _, args := range [][]string{{}, {"novalue"}, {"=v"}, {"-n", "0", "k=v"}, {"-n", "-1", "k=v"}, {"-hits", "4294967296", "k=v"}} {
		if err := run(append([]string{"-addr", lis.Addr().String()}, args...), io.Discard, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
