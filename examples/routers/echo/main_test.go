package main

import (
	"net/http"
	"testing"

	"github.com/hotlimit/hotlimit/examples/routers/internal/routertest"
	"github.com/hotlimit/hotlimit/httplimit"
)

func TestLimitedByIP(t *testing.T) {
	routertest.Check(t, func(mw *httplimit.Middleware) http.Handler { return newRouter(mw) })
}
