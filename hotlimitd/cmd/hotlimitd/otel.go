package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/otellimit"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// otelConfigured reports whether the standard variables ask for an OTLP
// metric exporter: OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT set, and OTEL_SDK_DISABLED not
// "true" and OTEL_METRICS_EXPORTER not "none".
func otelConfigured() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_METRICS_EXPORTER") == "none" {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != ""
}

// checkOTelEndpoints checks the variables that name the metrics
// collector, as the exporter reads them (the metrics one wins): see
// checkEndpoints.
func checkOTelEndpoints() error {
	return checkEndpoints("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
}

// checkEndpoints refuses an endpoint variable the exporter could not
// use: one that is not a URL (the exporter reports it to
// OpenTelemetry's error handler and exports to its default,
// localhost:4317, instead), or an http or https URL without a host.
func checkEndpoints(vars ...string) error {
	for _, v := range vars {
		s := strings.TrimSpace(os.Getenv(v)) // as the exporter reads it
		if s == "" {
			continue
		}
		u, err := url.Parse(s)
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the value, which the message names
		}
		if err == nil && (strings.EqualFold(u.Scheme, "http") || strings.EqualFold(u.Scheme, "https")) && u.Host == "" {
			err = errors.New("no host")
		}
		if err != nil {
			return fmt.Errorf("%s=%q: %v; want the collector's URL, such as http://collector:4317", v, s, err)
		}
	}
	return nil
}

// startOTel returns otellimit's observer on a meter provider that
// exports over OTLP/gRPC as the standard OTEL_EXPORTER_OTLP_* variables
// say (endpoint, headers, timeout, TLS; OTEL_METRIC_EXPORT_INTERVAL), and
// the function that flushes and stops it; nil, nil when no exporter is
// configured (see otelConfigured).
func startOTel(ctx context.Context) (admission.Observer, func(context.Context) error, error) {
	if !otelConfigured() {
		return nil, nil, nil
	}
	if err := checkOTelEndpoints(); err != nil {
		return nil, nil, err
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"} {
		if p := os.Getenv(v); p != "" && p != "grpc" {
			return nil, nil, fmt.Errorf("%s=%s: hotlimitd exports OTLP over gRPC only (grpc)", v, p)
		}
	}
	exp, err := otlpmetricgrpc.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OpenTelemetry exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	obs, err := otellimit.New(otellimit.Options{MeterProvider: mp})
	if err != nil {
		mp.Shutdown(ctx)
		return nil, nil, err
	}
	return obs, mp.Shutdown, nil
}

// tracesConfigured reports whether the standard variables ask for an
// OTLP span exporter: OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, and OTEL_SDK_DISABLED not
// "true" and OTEL_TRACES_EXPORTER not "none".
func tracesConfigured() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// startTracing returns a tracer whose spans a batch processor exports
// over OTLP/gRPC as the standard variables say (OTEL_EXPORTER_OTLP_*,
// the TRACES ones winning; OTEL_TRACES_SAMPLER and its argument, parent
// based always-on by default), and the function that flushes and stops
// it; nil, nil when no exporter is configured (see tracesConfigured).
func startTracing(ctx context.Context) (trace.Tracer, func(context.Context) error, error) {
	if !tracesConfigured() {
		return nil, nil, nil
	}
	if err := checkEndpoints("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); err != nil {
		return nil, nil, err
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if p := os.Getenv(v); p != "" && p != "grpc" {
			return nil, nil, fmt.Errorf("%s=%s: hotlimitd exports OTLP over gRPC only (grpc)", v, p)
		}
	}
	exp, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OpenTelemetry span exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	return tp.Tracer("github.com/hotlimit/hotlimit/hotlimitd"), tp.Shutdown, nil
}
