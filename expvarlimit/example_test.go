package expvarlimit_test

import (
	"encoding/json"
	"expvar"
	"fmt"
	"log"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/expvarlimit"
)

// A limiter's counters at /debug/vars: serve http.DefaultServeMux (for
// example http.ListenAndServe(addr, nil)) and GET /debug/vars shows
// "api_limiter": {"Allowed": …}. Here the published value is read back
// directly.
func Example() {
	lim, err := hotlimit.New(hotlimit.FixedWindow{Limit: 2, Window: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	if err := expvarlimit.Publish("api_limiter", lim); err != nil {
		log.Fatal(err)
	}

	for range 3 {
		lim.Allow("user:42")
	}
	var stats struct{ Allowed, Denied, Keys int64 }
	if err := json.Unmarshal([]byte(expvar.Get("api_limiter").String()), &stats); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", stats)
	// Output:
	// {Allowed:2 Denied:1 Keys:1}
}
