package customization

import (
	"errors"

	"github.com/cluster-mapper/cluster-mapper/pkg/rendercheck"
)

// Every step of a rendering (each mutation, the object's own patch) is held to
// pkg/rendercheck's rule by Render; these are its helpers.

// maxRenderingBytes is Options.MaxRenderingBytes (0 for a nil snapshot: the default bound).
func (s *Snapshot) maxRenderingBytes() int64 {
	if s == nil {
		return 0
	}
	return s.opts.MaxRenderingBytes
}

// refusalReason returns the reason of a *rendercheck.Refusal err wraps, else otherwise.
func refusalReason(err error, otherwise string) string {
	var r *rendercheck.Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return otherwise
}
