package httpretry_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/hotlimit/hotlimit/httpretry"
)

// A client whose server refuses the first two calls with 429. The
// Transport waits as the server asks (here the RateLimit field's t=0: no
// wait, so only the short backoff) and retries; the caller sees only the
// final answer.
func Example() {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls <= 2 {
			w.Header().Set("RateLimit-Policy", `"default";q=100;w=60`)
			w.Header().Set("RateLimit", `"default";r=0;t=0`)
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()

	client := &http.Client{Transport: &httpretry.Transport{
		BaseDelay: time.Millisecond, // keep the example fast
	}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", calls, "calls")
	// Output: 200 hello after 3 calls
}

// ServerWait reads the wait a response asks for, here from an HTTP-date
// in Retry-After measured against the response's own Date.
func ExampleServerWait() {
	resp := &http.Response{Header: http.Header{}}
	resp.Header.Set("Date", "Sun, 29 Nov 2026 12:00:00 GMT")
	resp.Header.Set("Retry-After", "Sun, 29 Nov 2026 12:00:30 GMT")
	d, ok := httpretry.ServerWait(resp, time.Now())
	fmt.Println(d, ok)
	// Output: 30s true
}
