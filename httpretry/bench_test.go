package httpretry

import (
	"net/http"
	"testing"
	"time"
)

// okRT answers every request with an empty 200 without any I/O, so the
// benchmarks measure the Transport's own cost per request.
type okRT struct{}

func (okRT) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// BenchmarkRoundTrip is the overhead of the Transport on a request that
// succeeds at once, against calling the base directly.
func BenchmarkRoundTrip(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "http://api.example.test/v1/items", nil)
	b.Run("base", func(b *testing.B) {
		b.ReportAllocs()
		var rt http.RoundTripper = okRT{} // an interface call, as a Transport makes
		for b.Loop() {
			resp, _ := rt.RoundTrip(req)
			resp.Body.Close()
		}
	})
	for _, gated := range []bool{false, true} {
		name := "httpretry"
		tr := &Transport{Base: okRT{}}
		if gated {
			name += "/another-host-gated"
			tr.gates.push("http://other.example.test", time.Now(), time.Hour)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, _ := tr.RoundTrip(req)
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkServerWait parses a 429's rate-limit fields.
func BenchmarkServerWait(b *testing.B) {
	for name, h := range map[string][2]string{
		"retry-after": {"Retry-After", "30"},
		"ratelimit":   {"RateLimit", `"burst";r=0;t=3, "daily";r=17;t=30000;pk=:cHsdsRa894==:`},
		"http-date":   {"Retry-After", "Sun, 29 Nov 2026 12:00:30 GMT"},
	} {
		resp := &http.Response{Header: http.Header{}}
		resp.Header.Set(h[0], h[1])
		now := time.Now()
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := ServerWait(resp, now); !ok {
					b.Fatal("no wait")
				}
			}
		})
	}
}
