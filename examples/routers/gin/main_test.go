package main

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/hotlimit/hotlimit/examples/routers/internal/routertest"
	"github.com/hotlimit/hotlimit/httplimit"
)

func TestLimitedByIP(t *testing.T) {
	gin.SetMode(gin.TestMode) // no debug lines for each route
	routertest.Check(t, func(mw *httplimit.Middleware) http.Handler { return newRouter(mw) })
}
