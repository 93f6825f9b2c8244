package rendercheck

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Reasons of a Refusal; they are also the reasons a Customization's status and the logs give
// (pkg/customization).
const (
	// ReasonProtectedFieldChanged: the rendering changes a protected field (Changed), or a
	// patch operation targets one (ModifiesProtected).
	ReasonProtectedFieldChanged = "ProtectedFieldChanged"
	// ReasonTooLarge: the rendering is larger than the bound (TooLarge).
	ReasonTooLarge = "RenderingTooLarge"
)

// Refusal is a rendering that may not be shown: it changes a protected field, or it is too
// large. It holds no part of the rendering, so keeping the error keeps nothing large.
type Refusal struct {
	// Reason is ReasonProtectedFieldChanged or ReasonTooLarge.
	Reason string
	// Path is the JSON pointer of the protected field (ReasonProtectedFieldChanged); "" is
	// the whole object.
	Path string
	// Size is the rendering's size in bytes as far as it was counted (at least Limit+1), and
	// Limit the bound (ReasonTooLarge).
	Size, Limit int64
}

// Error implements error.
func (r *Refusal) Error() string {
	if r.Reason == ReasonTooLarge {
		return fmt.Sprintf("the rendering is larger than %d bytes (counted %d before stopping), the largest a rendering may be (mapper-apiserver --max-rendering-bytes)", r.Limit, r.Size)
	}
	what := "the whole object"
	if r.Path != "" {
		what = r.Path
	}
	return fmt.Sprintf("changes %s, which a rendering may not change (identity, version, lifecycle, status and the kcp.io marks are protected)", what)
}

// AsError returns r as an error: nil when r is nil (a nil *Refusal in an error interface is
// not a nil error).
func (r *Refusal) AsError() error {
	if r == nil {
		return nil
	}
	return r
}

// Check returns a *Refusal when after, a rendering of before, changes a protected field
// (Changed) or is larger than maxBytes (TooLarge: 0 is DefaultMaxBytes, negative no bound);
// nil when it may be shown. Every rendering path runs it on its result.
func Check(before, after *unstructured.Unstructured, maxBytes int64) error {
	if path, changed := Changed(before, after); changed {
		return &Refusal{Reason: ReasonProtectedFieldChanged, Path: path}
	}
	if r := TooLarge(after, maxBytes); r != nil {
		return r
	}
	return nil
}
