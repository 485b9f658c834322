// Command gin is a Gin engine behind httplimit: each client IP may send
// 100 requests a minute, and the next one gets 429 Too Many Requests with
// Retry-After and the RateLimit headers. Gin's middleware is a
// gin.HandlerFunc, so limit adapts httplimit's net/http one.
//
//	go run ./examples/routers/gin    # from the repository root; then curl -i 127.0.0.1:8080/hello
package main

import (
	"log"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
)

func main() {
	mw, err := httplimit.ByIP(hotlimit.PerMinute(100))
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(newRouter(mw).Run("127.0.0.1:8080"))
}

func newRouter(mw *httplimit.Middleware) *gin.Engine {
	r := gin.New()
	r.SetTrustedProxies(nil) // like httplimit.ByIP, trust no X-Forwarded-For
	r.Use(limit(mw))
	r.GET("/hello", func(c *gin.Context) {
		c.String(http.StatusOK, "hello\n")
	})
	return r
}

// limit runs the rest of the chain only if mw passes the request on;
// otherwise mw has written the refusal, and the chain stops there.
func limit(mw *httplimit.Middleware) gin.HandlerFunc {
	return func(c *gin.Context) {
		passed := false
		mw.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			passed = true
			c.Request = r
			c.Next()
		})).ServeHTTP(c.Writer, c.Request)
		if !passed {
			c.Abort()
		}
	}
}
