package layeroracle

import (
	"context"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// Kept is an admission.Backend that is not a Local, as a shared store:
// it admits every request and keeps its layers' limits and keys, as
// "limit=key", for the tests that compare the keys a transport builds.
type Kept struct{ Keys []string }

// AllowStates admits the request and keeps its layers' keys.
func (b *Kept) AllowStates(_ context.Context, layers []admission.Layer, _ []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	for _, ly := range layers {
		b.Keys = append(b.Keys, ly.Limit+"="+ly.Key)
	}
	return hotlimit.Decision{Allowed: true, Limit: 100, Remaining: 99}, 0, nil
}

// Reset does nothing.
func (b *Kept) Reset(context.Context, string, string) error { return nil }

// Close does nothing.
func (b *Kept) Close() error { return nil }
