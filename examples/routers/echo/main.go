// Command echo is an Echo server behind httplimit: each client IP may send
// 100 requests a minute, and the next one gets 429 Too Many Requests with
// Retry-After and the RateLimit headers. echo.WrapMiddleware takes
// httplimit's func(http.Handler) http.Handler.
//
//	go run ./examples/routers/echo    # from the repository root; then curl -i 127.0.0.1:8080/hello
package main

import (
	"log"
	"net/http"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/labstack/echo/v5"
)

func main() {
	mw, err := httplimit.ByIP(hotlimit.PerMinute(100))
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(newRouter(mw).Start("127.0.0.1:8080"))
}

func newRouter(mw *httplimit.Middleware) *echo.Echo {
	e := echo.New()
	e.Use(echo.WrapMiddleware(mw.Handler))
	e.GET("/hello", func(c *echo.Context) error {
		return c.String(http.StatusOK, "hello\n")
	})
	return e
}
