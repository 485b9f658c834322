package otellimit

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// discard is a span exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkObservers measures what each integration adds to one
// middleware decision beside no observer, for an admitted request and
// for a denied one (a Bearer token, one layer, headers on):
//
//	none        no hook
//	slog        httplimit.DenialLogger as the hook (its budget spent, so
//	            a denial is counted, not written: the flood case)
//	otel-hook   Observer.Hook: the request counter (and no span to add an
//	            event to)
//	otel-metrics Observer.Hook and the Observer in Config.Observers,
//	            with SpansOff: also the backend's duration and remaining
//	            histograms
//	otel-spans  the same with SpansAll on an SDK TracerProvider that
//	            samples every span and exports to nowhere, through a
//	            batch processor
//	parent/none, parent/otel-events
//	            each request under a sampled span of its own (as otelhttp
//	            starts one), without and with Observer.Hook's event on it (the
//	            default SpanEvents): their difference is what the event
//	            costs a sampled request
//
// The metrics go to an SDK MeterProvider with a manual reader that is
// never collected.
func BenchmarkObservers(b *testing.B) {
	for _, traffic := range []string{"allowed", "denied"} {
		for _, obs := range []string{"none", "slog", "otel-hook", "otel-metrics", "otel-spans", "parent/none", "parent/otel-events"} {
			b.Run(traffic+"/"+obs, func(b *testing.B) {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
				defer tp.Shutdown(context.Background())
				policy := hotlimit.Policy(hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: time.Nanosecond}, Burst: 1 << 20})
				if traffic == "denied" {
					policy = hotlimit.FixedWindow{Limit: 1, Window: time.Hour}
				}
				cfg := httplimit.Config{
					Limits:       map[string]hotlimit.Policy{"l": policy},
					Groups:       []httplimit.Group{{Name: "g", Limit: "l"}},
					DefaultGroup: "g",
					Key:          httplimit.TokenKey("Authorization"),
					Backend:      admission.LocalBackend(hotlimit.WithSweepInterval(0)),
				}
				switch obs {
				case "slog":
					dl, err := httplimit.NewDenialLogger(slog.New(slog.DiscardHandler), httplimit.DenialLogOptions{Instance: "bench", Burst: 1, Rate: hotlimit.PerHour(1)})
					if err != nil {
						b.Fatal(err)
					}
					cfg.Hook = dl.Hook
				case "otel-hook", "otel-metrics", "otel-spans", "parent/otel-events":
					spans := SpansOff
					switch obs {
					case "otel-spans":
						spans = SpansAll
					case "parent/otel-events":
						spans = SpanEvents
					}
					h, err := New(Options{MeterProvider: mp, TracerProvider: tp, Spans: spans})
					if err != nil {
						b.Fatal(err)
					}
					cfg.Hook = h.Hook
					if obs == "otel-metrics" || obs == "otel-spans" {
						cfg.Observers = []admission.Observer{h}
					}
				}
				m, err := httplimit.New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				hd := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("Authorization", "Bearer hl_bench_0123456789abcdef")
				w := &nopWriter{h: http.Header{}}
				hd.ServeHTTP(w, r) // the key exists, the attribute sets are built
				b.ReportAllocs()
				if strings.HasPrefix(obs, "parent/") {
					// Each request runs under a sampled span of its own,
					// as otelhttp would start it: the rows differ by the
					// hook's event on it.
					tracer := tp.Tracer("bench")
					for b.Loop() {
						ctx, span := tracer.Start(context.Background(), "request")
						clear(w.h)
						hd.ServeHTTP(w, r.WithContext(ctx))
						span.End()
					}
					return
				}
				for b.Loop() {
					clear(w.h)
					hd.ServeHTTP(w, r)
				}
			})
		}
	}
}

// nopWriter is a ResponseWriter that keeps only its header map.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nopWriter) WriteHeader(int)             {}
