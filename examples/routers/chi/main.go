// Command chi is a chi router behind httplimit: each client IP may send
// 100 requests a minute, and the next one gets 429 Too Many Requests with
// Retry-After and the RateLimit headers. chi takes httplimit's
// func(http.Handler) http.Handler as it is.
//
//	go run ./examples/routers/chi    # from the repository root; then curl -i 127.0.0.1:8080/hello
package main

import (
	"log"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
)

func main() {
	mw, err := httplimit.ByIP(hotlimit.PerMinute(100))
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", newRouter(mw)))
}

func newRouter(mw *httplimit.Middleware) http.Handler {
	r := chi.NewRouter()
	r.Use(mw.Handler)
	r.Get("/hello", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("hello\n"))
	})
	return r
}
