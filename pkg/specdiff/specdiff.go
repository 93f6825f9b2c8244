// Package specdiff applies an object's per-location patch, the annotation
// spec-diff.kcp.io/<location> (docs/design.md, "Names": an RFC 6902 JSON patch that the location's
// view applies after the Customizations; controllers such as the replica splitter write it, and
// people may). The view applies it and never shows the annotation itself; the rest of the
// rendering (hiding other locations' data, Customizations) lives with its callers.
package specdiff

import (
	"encoding/json"
	"fmt"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// protectedPaths are the JSON pointers a spec-diff patch may not touch, nor anything under
// them: what identifies the object (a patched name or namespace would be another object on the
// target), its version and its status (which the target reports, not the source).
var protectedPaths = []string{"/apiVersion", "/kind", "/metadata/name", "/metadata/namespace",
	"/metadata/uid", "/metadata/resourceVersion", "/metadata/generation", "/status"}

// Error is a patch that cannot be applied: malformed JSON, not an RFC 6902 patch, an operation
// that fails on the object (a test that does not hold, a path that does not exist), or an
// operation on a protected path. It names the annotation so that a person can find it.
type Error struct {
	// Location is the location whose patch failed.
	Location string
	// Err says why.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("the patch in annotation %s cannot be applied: %v", contract.SpecDiffAnnotation(e.Location), e.Err)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Has reports whether u carries a patch for location.
func Has(u *unstructured.Unstructured, location string) bool {
	_, ok := Patch(u, location)
	return ok
}

// Patch returns the value of u's spec-diff.kcp.io/<location> annotation and whether u has it.
// It reads the annotations in place (Unstructured.GetAnnotations copies the map), since every
// view rendering asks.
func Patch(u *unstructured.Unstructured, location string) (string, bool) {
	v, ok := annotations(u)[contract.SpecDiffAnnotation(location)].(string)
	return v, ok
}

// annotations returns u's metadata.annotations map in place (nil when absent); read only.
func annotations(u *unstructured.Unstructured) map[string]interface{} {
	m, _, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "annotations")
	ann, _ := m.(map[string]interface{})
	return ann
}

// Apply returns view with the patch patch (the value of spec-diff.kcp.io/<location>, "" for
// none) applied and every spec-diff.kcp.io/ annotation removed. view is not changed; the result
// is a new object, or view itself when there is neither a patch nor an annotation to remove.
// The error is an *Error; on error the result is nil.
func Apply(view *unstructured.Unstructured, location, patch string) (*unstructured.Unstructured, error) {
	out := view
	if patch != "" {
		p, err := decode(patch)
		if err != nil {
			return nil, &Error{Location: location, Err: err}
		}
		doc, err := json.Marshal(view.Object)
		if err != nil {
			return nil, &Error{Location: location, Err: err}
		}
		patched, err := p.Apply(doc)
		if err != nil {
			return nil, &Error{Location: location, Err: err}
		}
		// util/json decodes numbers as int64 where they are integers, as unstructured objects hold them.
		obj := map[string]interface{}{}
		if err := utiljson.Unmarshal(patched, &obj); err != nil {
			return nil, &Error{Location: location, Err: fmt.Errorf("the patched object is not a JSON object: %w", err)}
		}
		out = &unstructured.Unstructured{Object: obj}
	}
	return stripAnnotations(out, out != view), nil
}

// decode parses an RFC 6902 patch and refuses operations on protected paths.
func decode(patch string) (jsonpatch.Patch, error) {
	p, err := jsonpatch.DecodePatch([]byte(patch))
	if err != nil {
		return nil, fmt.Errorf("not an RFC 6902 JSON patch: %w", err)
	}
	for i, op := range p {
		for _, key := range []string{"path", "from"} {
			raw, ok := op[key]
			if !ok || raw == nil {
				continue
			}
			var path string
			if err := json.Unmarshal(*raw, &path); err != nil {
				return nil, fmt.Errorf("operation %d: %s is not a string", i, key)
			}
			if path == "" {
				return nil, fmt.Errorf("operation %d replaces the whole object, which a per-location patch may not do", i)
			}
			for _, protected := range protectedPaths {
				if path == protected || strings.HasPrefix(path, protected+"/") {
					return nil, fmt.Errorf("operation %d changes %q, which a per-location patch may not change", i, path)
				}
			}
		}
	}
	return p, nil
}

// stripAnnotations removes every spec-diff.kcp.io/ annotation from u, which is copied first
// unless owned (the caller made it).
func stripAnnotations(u *unstructured.Unstructured, owned bool) *unstructured.Unstructured {
	has := false
	for k := range annotations(u) {
		if strings.HasPrefix(k, contract.SpecDiffAnnotationPrefix) {
			has = true
			break
		}
	}
	if !has {
		return u
	}
	if !owned {
		u = u.DeepCopy()
	}
	ann := u.GetAnnotations()
	for k := range ann {
		if strings.HasPrefix(k, contract.SpecDiffAnnotationPrefix) {
			delete(ann, k)
		}
	}
	u.SetAnnotations(ann)
	return u
}
