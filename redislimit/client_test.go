package redislimit

import (
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit"
	"github.com/redis/go-redis/v9"
)

// TestClusterClientRedirectsRejected: a ClusterClient retries a command
// after a broken connection or a timeout (on the same node, then another)
// up to MaxRedirects times, whatever MaxRetries says; a script that ran
// before the connection broke would then consume twice. New must reject
// such a client, as it rejects MaxRetries.
func TestClusterClientRedirectsRejected(t *testing.T) {
	tb := hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 5}
	retrying := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer retrying.Close()
	if _, err := New(retrying, "x", tb); err == nil || !strings.Contains(err.Error(), "MaxRedirects") {
		t.Fatalf("New with a ClusterClient that retries through MaxRedirects: err = %v; want one naming MaxRedirects", err)
	}
	ok := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: -1, MaxRedirects: -1, ContextTimeoutEnabled: true})
	defer ok.Close()
	if _, err := New(ok, "x", tb); err != nil {
		t.Fatalf("New with MaxRedirects: -1: %v", err)
	}
}
