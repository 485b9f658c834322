// Package hotlimitd is a rate limit service that Envoy (and Istio and the
// gateways built on Envoy) asks over gRPC: it implements
// envoy.service.ratelimit.v3.RateLimitService and decides every descriptor
// of a request with hotlimit's exact algorithms, in process, on Redis or
// Redis Cluster, or on leases from Redis.
package hotlimitd
