package redislimit_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/redis/go-redis/v9"
)

// A login limit shared by every replica: 5 attempts per account per 15
// minutes, sliding. If Redis is down it falls back to the same limit per
// process rather than opening.
func Example() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		MaxRetries:            -1,   // a retried decision could consume twice
		ContextTimeoutEnabled: true, // so that WithTimeout holds
	})
	defer client.Close()

	login, err := redislimit.New(client, "login",
		hotlimit.SlidingWindow{Limit: 5, Window: 15 * time.Minute},
		redislimit.WithTimeout(50*time.Millisecond),
		redislimit.WithFallbackLocal(hotlimit.WithMaxKeys(100_000)),
		redislimit.WithLocalDenials(10_000), // answer known abusers in process
	)
	if err != nil {
		log.Fatal(err)
	}
	defer login.Close()

	d, err := login.Allow(context.Background(), "alice@example.com")
	if err != nil {
		log.Printf("rate limit decided in process: %v", err) // d is the in-process fallback's answer
	}
	if !d.Allowed {
		fmt.Printf("too many attempts, retry in %v\n", d.RetryAfter.Round(time.Second))
		return
	}
	fmt.Println("attempt allowed,", d.Remaining, "left")
}
