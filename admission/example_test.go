package admission_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// job is a transport's request: here, a job submitted by a tenant.
type job struct{ tenant string }

// A transport of its own (a job queue): one group, keyed by tenant, on the
// in-process backend. httplimit and grpclimit are built the same way.
func Example() {
	p, err := admission.New(admission.Config[job]{
		Prefix: "jobs",
		Noun:   "job",
		Limits: map[string]hotlimit.Policy{"submit": hotlimit.FixedWindow{Limit: 2, Window: time.Minute}},
		Groups: []admission.Group[job]{{Name: "submit", Limit: "submit"}},
		// The identity is kind:value (see KeyFunc). Tenant names here are
		// issued by the service, letters only, so they are written as is.
		Key: func(dst []byte, j job) ([]byte, error) {
			return append(append(dst, "tenant:"...), j.tenant...), nil
		},
		// A manual clock keeps the example inside one window; omit it.
		Backend: admission.LocalBackend(hotlimit.WithClock(hotlimit.NewManualClock())),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	for range 3 {
		res := p.Decide(context.Background(), job{tenant: "acme"}, 0, 1)
		fmt.Println(res.Outcome, res.Decision.Remaining)
		p.Release(res)
	}
	// Output:
	// allowed 1
	// allowed 0
	// denied 0
}
