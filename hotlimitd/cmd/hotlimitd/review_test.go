package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestShutdownEndsHealthWatch: a client watching health (grpc-go's
// client-side health checking keeps a Watch open) sees NOT_SERVING when
// SIGTERM arrives, and then its stream ends, so that the graceful stop
// finishes without waiting -shutdown-grace (1m here) and stopping RPCs.
func TestShutdownEndsHealthWatch(t *testing.T) {
	r := startCmd(t, nil)
	// The deadline only turns a stream that never ends into a failure
	// rather than a hang; nothing waits for it when the server is right.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hc := healthpb.NewHealthClient(r.conn)
	var watches []healthpb.Health_WatchClient
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatal(err)
		}
		if m, err := w.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("watch %q: %v, %v", svc, m, err)
		}
		watches = append(watches, w)
	}
	r.sigs <- syscall.SIGTERM
	for i, w := range watches {
		if m, err := w.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("watch %d after SIGTERM: %v, %v", i, m, err)
		}
		if m, err := w.Recv(); err == nil {
			t.Fatalf("watch %d: %v after NOT_SERVING, want the stream to end", i, m)
		}
	}
	if err := <-r.done; err != nil {
		t.Fatalf("run: %v", err)
	}
	r.a = nil
	if logs := r.logs.String(); strings.Contains(logs, "outlived") {
		t.Fatalf("the health watches held the graceful stop until -shutdown-grace:\n%s", logs)
	}
}

// TestRedisClientLogs: the Redis client's own messages (go-redis writes
// a line per failed dial) go through the command's log, as JSON with
// -log-format json at -log-level debug, not as plain lines on standard
// error that break a JSON log and bypass -log-level.
func TestRedisClientLogs(t *testing.T) {
	r := startCmd(t, nil, "-log-format", "json", "-log-level", "debug")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	c := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("Ping of a closed port answered")
	}
	r.stop(t)
	logs := r.logs.String()
	if !strings.Contains(logs, "failed to dial") {
		t.Fatalf("the Redis client's dial failure is not in the command's log:\n%s", logs)
	}
	allJSON(t, logs)
}

// TestInvalidUTF8: the command's gRPC server decides a descriptor whose
// value is not UTF-8 (hotlimitd.ServerOption) instead of failing it with
// Internal, which Envoy's default failure mode lets through unlimited.
func TestInvalidUTF8(t *testing.T) {
	r := startCmd(t, nil)
	var e, d, req []byte
	e = protowire.AppendTag(e, 1, protowire.BytesType)
	e = protowire.AppendString(e, "generic_key")
	e = protowire.AppendTag(e, 2, protowire.BytesType)
	e = protowire.AppendString(e, "caf\xe9") // Latin-1, as a header may hold it
	d = protowire.AppendTag(d, 1, protowire.BytesType)
	d = protowire.AppendBytes(d, e)
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendString(req, "hotlimitd")
	req = protowire.AppendTag(req, 2, protowire.BytesType)
	req = protowire.AppendBytes(req, d)
	resp := new(rlsv3.RateLimitResponse)
	err := r.conn.Invoke(context.Background(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", req, resp, grpc.ForceCodecV2(wireCodec{}))
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	if st := resp.Statuses; resp.OverallCode != rlsv3.RateLimitResponse_OK || len(st) != 1 || st[0].CurrentLimit.GetRequestsPerUnit() != 100 || st[0].LimitRemaining != 99 {
		t.Fatalf("response %v, want generic_key's limit, 99 left", resp)
	}
}

// wireCodec sends a request's wire bytes as they are ([]byte) and reads
// the answer as protobuf.
type wireCodec struct{}

func (wireCodec) Name() string { return "proto" }

func (wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// TestOTelErrorsLogged: OpenTelemetry's errors (an OTLP export that
// failed) go through the command's log, as JSON with -log-format json,
// not as plain lines that OpenTelemetry's default handler prints on
// standard error.
func TestOTelErrorsLogged(t *testing.T) {
	r := startCmd(t, nil, "-log-format", "json")
	otel.Handle(errors.New("export probe failed"))
	r.stop(t)
	logs := r.logs.String()
	if !strings.Contains(logs, "export probe failed") {
		t.Fatalf("OpenTelemetry's error is not in the command's log:\n%s", logs)
	}
	allJSON(t, logs)
}

// allJSON fails the test unless every line of logs is JSON.
func allJSON(t *testing.T, logs string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("a log line is not JSON: %s", line)
		}
	}
}

// TestEmptyAddresses: -grpc "" and -http "" are refused with an error
// naming the flag; net.Listen would take "" as any free port on every
// interface.
func TestEmptyAddresses(t *testing.T) {
	for _, args := range [][]string{{"-grpc", "", "-http", "127.0.0.1:0"}, {"-grpc", "127.0.0.1:0", "-http", ""}} {
		_, err := parseFlags(args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), args[0]) && !strings.Contains(err.Error(), args[2]) {
			t.Errorf("%q: error %v, want one naming the empty flag", args, err)
		}
	}
}

// TestShutdownEndsUnknownHealthWatch: a Watch of a service name that was
// never registered (told SERVICE_UNKNOWN, and nothing at shutdown) ends
// when SIGTERM arrives, so that it does not hold the graceful stop until
// -shutdown-grace (1m here).
func TestShutdownEndsUnknownHealthWatch(t *testing.T) {
	r := startCmd(t, nil)
	// The deadline only turns a stream that never ends into a failure
	// rather than a hang; nothing waits for it when the server is right.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w, err := healthpb.NewHealthClient(r.conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
		t.Fatalf("watch: %v, %v", m, err)
	}
	r.sigs <- syscall.SIGTERM
	if m, err := w.Recv(); err == nil {
		t.Fatalf("watch: %v after SIGTERM, want the stream to end", m)
	}
	if err := <-r.done; err != nil {
		t.Fatalf("run: %v", err)
	}
	r.a = nil
	if logs := r.logs.String(); strings.Contains(logs, "outlived") {
		t.Fatalf("the health watch held the graceful stop until -shutdown-grace:\n%s", logs)
	}
}
