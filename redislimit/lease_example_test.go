package redislimit_test

import (
	"context"
	"log"
	"net/http"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/redis/go-redis/v9"
)

// A budget of 1,000 requests per second per user, shared by every replica
// that runs this code against the same Redis, decided in process from
// leases.
func ExampleWithLeases() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		MaxRetries:            -1,   // a retried take could debit twice
		ContextTimeoutEnabled: true, // so that WithTimeout holds
	})
	l, err := redislimit.New(client, "api", hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1000), Burst: 1000},
		redislimit.WithLeases(50, 0)) // at most 50 units per user unspent on each replica
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close() // gives unspent units back

	go func() { // idle users' leases go back to the shared budget
		for range time.Tick(time.Second) {
			l.SweepLeases(context.Background())
		}
	}()

	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		d, err := l.AllowN(r.Context(), r.Header.Get("X-User"), 1)
		if err != nil {
			log.Print(err) // Redis could not decide: the failure policy answered
		}
		if !d.Allowed {
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		w.Write([]byte("hello\n"))
	})
}

// Leases behind an httplimit middleware: limits shared by every replica,
// decided in process, with redislimit's breaker, hooks and failure
// policy.
func ExampleBackendFactory_leases() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", MaxRetries: -1, ContextTimeoutEnabled: true})
	backend := redislimit.BackendFactory(client,
		redislimit.WithFallbackLocal(), // Redis down: limit per replica
		redislimit.WithLeases(20, 0))
	m, err := httplimit.New(httplimit.Config{
		Limits:       map[string]hotlimit.Policy{"api": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(500), Burst: 500}},
		Groups:       []httplimit.Group{{Name: "api", Limit: "api"}},
		DefaultGroup: "api",
		Key:          httplimit.TokenKey("Authorization"),
		Backend:      backend,
	})
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/", m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hello\n"))
	})))
}
