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
	"github.com/cluster-mapper/cluster-mapper/pkg/rendercheck"
)

// Error is a patch that cannot be applied: malformed JSON, not an RFC 6902 patch, an operation
// that fails on the object (a test that does not hold, a path that does not exist), or a
// patch that would change what a rendering may not change (then Err is a
// *rendercheck.Refusal). It names the annotation so that a person can find it.
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
//
// A patch may not change what a rendering may not change (pkg/rendercheck): an operation that
// changes a protected field, anything below one or an ancestor of one (the whole object,
// /metadata, /metadata/labels, /metadata/annotations) is refused before the patch runs, and
// the patched object is compared with view (rendercheck.Changed) as well, so that no sequence
// of operations gets around the rule. A test, and a copy from a protected field, read it only
// and are allowed.
//
// The error is an *Error (wrapping a *rendercheck.Refusal for a refused patch); on error the
// result is nil.
func Apply(view *unstructured.Unstructured, location, patch string) (*unstructured.Unstructured, error) {
	out := view
	if patch != "" {
		p, err := decode(patch)
		if err != nil {
			return nil, &Error{Location: location, Err: err}
		}
		if out, err = applyDecoded(view, p); err != nil {
			return nil, &Error{Location: location, Err: err}
		}
	}
	return stripAnnotations(out, out != view), nil
}

// applyDecoded returns a new object: view with p applied, refused (a *rendercheck.Refusal)
// when the result changes a protected field whatever the operations were.
func applyDecoded(view *unstructured.Unstructured, p jsonpatch.Patch) (*unstructured.Unstructured, error) {
	doc, err := json.Marshal(view.Object)
	if err != nil {
		return nil, err
	}
	patched, err := p.Apply(doc)
	if err != nil {
		return nil, err
	}
	// util/json decodes numbers as int64 where they are integers, as unstructured objects hold them.
	obj := map[string]interface{}{}
	if err := utiljson.Unmarshal(patched, &obj); err != nil {
		return nil, fmt.Errorf("the patched object is not a JSON object: %w", err)
	}
	out := &unstructured.Unstructured{Object: obj}
	if path, changed := rendercheck.Changed(view, out); changed {
		return nil, &rendercheck.Refusal{Reason: rendercheck.ReasonProtectedFieldChanged, Path: path}
	}
	return out, nil
}

// decode parses an RFC 6902 patch and refuses an operation that would change a protected
// field (rendercheck.ModifiesProtected): the path of add, remove, replace, move and copy, and
// the from of move (which removes it). A test and the from of a copy only read.
func decode(patch string) (jsonpatch.Patch, error) {
	p, err := jsonpatch.DecodePatch([]byte(patch))
	if err != nil {
		return nil, fmt.Errorf("not an RFC 6902 JSON patch: %w", err)
	}
	for i, op := range p {
		kind := op.Kind()
		for _, key := range []string{"path", "from"} {
			if kind == "test" || (key == "from" && kind != "move") {
				continue
			}
			raw, ok := op[key]
			if !ok || raw == nil {
				continue
			}
			var path string
			if err := json.Unmarshal(*raw, &path); err != nil {
				return nil, fmt.Errorf("operation %d: %s is not a string", i, key)
			}
			if protected, ok := rendercheck.ModifiesProtected(path); ok {
				return nil, fmt.Errorf("operation %d (%s %s %q): %w", i, kind, key, path, &rendercheck.Refusal{Reason: rendercheck.ReasonProtectedFieldChanged, Path: protected})
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
