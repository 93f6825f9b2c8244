package cache

import (
	"errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/rendercheck"
)

// checkRendering holds out, a rendering of the view pre (the view it started from, with
// location's own spec-diff.kcp.io/ annotation), to pkg/rendercheck's rule: whatever produced
// it (Customizations, the patch, both, or a future path), it may not change a protected
// field and may not be larger than maxBytes. The Customizations and the patch check their own
// steps, naming the step at fault; this is the check on the final object that no path skips.
// The error is a *customization.RenderError naming no Customization, wrapping the
// *rendercheck.Refusal.
func checkRendering(pre, out *unstructured.Unstructured, maxBytes int64) error {
	err := rendercheck.Check(pre, out, maxBytes)
	if err == nil {
		return nil
	}
	var r *rendercheck.Refusal
	errors.As(err, &r)
	return &customization.RenderError{Reason: r.Reason, Err: err}
}

// Refusal returns the *rendercheck.Refusal of a rendering refused for changing a protected
// field or for its size, nil for another failure.
func (f RenderFailure) Refusal() *rendercheck.Refusal {
	var r *rendercheck.Refusal
	if errors.As(f.Err, &r) {
		return r
	}
	return nil
}
