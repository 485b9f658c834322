package hotlimitd

import (
	_ "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	_ "github.com/hotlimit/hotlimit/admission"
	_ "github.com/hotlimit/hotlimit/otellimit"
	_ "github.com/hotlimit/hotlimit/promlimit"
	_ "github.com/hotlimit/hotlimit/redislimit"
	_ "github.com/hotlimit/hotlimit/redislimit/lease"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/health"
	_ "gopkg.in/yaml.v3"
)
