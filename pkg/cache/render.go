package cache

import (
	"context"
	"errors"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/specdiff"
)

// A location's view shows an object rendered for it: the view without what belongs to other
// locations (baseView), then the Customizations that select the object and the location, in
// name order, then the object's own spec-diff.kcp.io/<location> patch (DESIGN.md, "The control
// plane objects"; issue 14 items 1-3). The rendering of each (object version, location) that a
// rule touches is made once, when the version is stored, and kept (Object.rendered); a location
// no rule touches shares the base view.
//
// A rendering can fail (a CEL error or cost limit, a result the schema rejects, a malformed
// patch). A failure never removes anything (issue 14 item 4, the safety rule of DESIGN.md):
//   - a version whose rendering fails for a location that showed the previous version keeps
//     showing that location the previous rendering (lastGood): no event, the location's visible
//     resourceVersion does not move;
//   - a version that never rendered for a location is withheld from its view: not listed, not
//     watched (no ADDED, and no DELETED since it was never shown), and a GET answers 503 with
//     the reason rather than 404, so that a mapper confirming a deletion through the view
//     (after a restart of mapper-apiserver lost the last rendering) does not delete its copy.

// renderFor returns a copy of u (a source object of gvr in the logical cluster cluster,
// assigned to locations) as location's view shows it under rules (nil: no Customization, only
// the object's own patch). The error is a *customization.RenderError (or a *specdiff.Error
// without rules) when a mutation or the patch fails.
//
// A location u is shown to for its finalizer alone (not assigned, deletion.go) sees the base
// view: no rule renders an object for a location it is not assigned to.
func renderFor(rules Rules, gvr schema.GroupVersionResource, cluster string, u *unstructured.Unstructured, locations []string, location string) (*unstructured.Unstructured, error) {
	if !contract.HasLocation(locations, location) {
		return baseView(u, locations, location), nil
	}
	pre := viewOf(u, locations, location, true)
	if rules == nil {
		patch, _ := specdiff.Patch(pre, location)
		return specdiff.Apply(pre, location, patch)
	}
	return rules.Render(context.Background(), gvr, cluster, pre, location)
}

// touches reports whether rules (nil: none) or u's own spec-diff.kcp.io/<location> patch
// change u for location.
func touches(rules Rules, gvr schema.GroupVersionResource, cluster string, u *unstructured.Unstructured, location string) bool {
	if rules == nil {
		return specdiff.Has(u, location)
	}
	return rules.Touches(gvr, cluster, u, location)
}

// rulesDiffer reports whether the renderings of o for location under a and b may differ
// (either may be nil). It reads o's kept namespace and labels only: no decoding.
func rulesDiffer(a, b Rules, gvr schema.GroupVersionResource, o *Object, location string) bool {
	switch {
	case a != nil:
		return a.Differs(b, gvr, o.cluster, o.namespace, o.labels, location)
	case b != nil:
		return b.Differs(a, gvr, o.cluster, o.namespace, o.labels, location)
	}
	return false
}

// settleRendering renders o, once per object version before it is published, for each
// location a rule touches, and decides which failing locations keep the last rendering
// (o.lastGood) and which are withheld (left out of o.locations). prev is the version stored
// before o, nil for a new object. failed is called for each failing location.
func (o *Object) settleRendering(rules Rules, gvr schema.GroupVersionResource, prev *Object, failed func(location string, err error)) {
	withheld := false
	for _, loc := range o.assigned {
		if !touches(rules, gvr, o.cluster, o.u, loc) {
			continue
		}
		u, err := renderFor(rules, gvr, o.cluster, o.u, o.assigned, loc)
		if err == nil {
			if o.rendered == nil {
				o.rendered = map[string]*unstructured.Unstructured{}
			}
			o.rendered[loc] = u
			continue
		}
		failed(loc, err)
		if o.failed == nil {
			o.failed = map[string]error{}
		}
		o.failed[loc] = err
		if prev != nil && prev.HasLocation(loc) {
			if o.lastGood == nil {
				o.lastGood = map[string]*unstructured.Unstructured{}
			}
			o.lastGood[loc] = prev.view(loc)
			continue
		}
		withheld = true
	}
	if withheld {
		shown := slices.DeleteFunc(slices.Clone(o.assigned), func(l string) bool { return o.withheld(l) != nil })
		if len(shown) == 0 {
			shown = nil
		}
		o.locations = o.marks.viewLocations(o.assigned, shown)
	}
	if (o.rendered != nil || o.failed != nil) && o.variants == nil {
		o.variants = &locationVariants{}
	}
}

// view returns location's rendering of o, a copy the caller owns: the rendering made when o
// was stored, or when it failed the last rendering that succeeded (resourceVersion included:
// ForLocation sets it), or for a location no rule touches (and a location o is withheld from,
// which is never served) the base view.
func (o *Object) view(location string) *unstructured.Unstructured {
	return o.renderingOf(o.content(), location)
}

// renderingOf is view for a caller that holds the object's content u (Object.content), so
// that an object kept as bytes is decoded once for several locations. The renderings of two
// versions compare with sameView: both come from decoded JSON through the same steps, so
// their values have the same types (a rendering decoded from a variant's bytes would not:
// a status record's numbers are float64 until encoded).
func (o *Object) renderingOf(u *unstructured.Unstructured, location string) *unstructured.Unstructured {
	if r := o.rendered[location]; r != nil {
		return r.DeepCopy()
	}
	if lg := o.lastGood[location]; lg != nil {
		return lg.DeepCopy()
	}
	return baseView(u, o.assigned, location)
}

// withheld returns the error that keeps this version out of location's view (its rendering
// fails and no earlier version rendered), nil if none.
func (o *Object) withheld(location string) error {
	if o.lastGood[location] != nil {
		return nil
	}
	return o.failed[location]
}

// Withheld returns the error that keeps this version out of location's view (its rendering
// fails and no earlier version rendered), nil if none.
func (o *Object) Withheld(location string) error { return o.withheld(location) }

// WithheldError returns, when the object namespace/name assigned to location (in the logical
// cluster cluster, or in any when cluster is "") is withheld from location's view, the 503 a
// GET answers instead of 404: the object exists and is assigned, but cannot be shown as it
// would land on the target. nil otherwise.
func (s *ResourceStore) WithheldError(location, cluster, namespace, name string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, o := range s.failingObjects {
		if o.namespace != namespace || o.name != name || (cluster != "" && o.cluster != cluster) {
			continue
		}
		if err := o.withheld(location); err != nil {
			return withheldError(s.gvr.GroupResource(), name, location, err)
		}
	}
	return nil
}

// RenderFailure is one (object, location) whose current version does not render.
type RenderFailure struct {
	// GVR is the object's resource.
	GVR schema.GroupVersionResource
	// Cluster, Namespace and Name identify the object.
	Cluster, Namespace, Name string
	// Location is the location whose rendering fails.
	Location string
	// Withheld is true when the location never rendered the object (it is not in its view);
	// false when the view keeps the last rendering that succeeded.
	Withheld bool
	// Err is the failure: a *customization.RenderError, or a *specdiff.Error.
	Err error
}

// Customization returns the key (customization.RuleKey) of the Customization whose mutation
// failed, and false when the failure is the object's own spec-diff.kcp.io/ patch.
func (f RenderFailure) Customization() (customization.RuleKey, bool) {
	var re *customization.RenderError
	if errors.As(f.Err, &re) && re.Customization != "" {
		return customization.RuleKey{Cluster: re.Cluster, Namespace: re.Namespace, Name: re.Customization}, true
	}
	return customization.RuleKey{}, false
}

// isCustomization reports whether the failure is a Customization's (not the object's own patch).
func (f RenderFailure) isCustomization() bool {
	_, ok := f.Customization()
	return ok
}

// RenderFailures returns the (object, location) pairs of the store whose current version does
// not render, in no particular order. It costs O(failing objects).
func (s *ResourceStore) RenderFailures() []RenderFailure {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []RenderFailure
	for _, o := range s.failingObjects {
		for loc, err := range o.failed {
			out = append(out, RenderFailure{GVR: s.gvr, Cluster: o.cluster, Namespace: o.namespace, Name: o.name,
				Location: loc, Withheld: o.lastGood[loc] == nil, Err: err})
		}
	}
	return out
}

// withheldError builds the 503 of a withheld object. It carries no Retry-After: client-go
// retries a 503 with Retry-After by itself (up to 10 times), which would hold a mapper's
// deletion check or kubectl for minutes; the object shows once its patch is fixed, which no
// retry interval predicts.
func withheldError(gr schema.GroupResource, name, location string, err error) error {
	msg := contract.Truncate(strings.TrimSpace(err.Error()), maxLoggedValue)
	e := apierrors.NewServiceUnavailable(
		"the " + gr.String() + " \"" + name + "\" is assigned to location \"" + location +
			"\" but is withheld from its view: " + msg)
	e.ErrStatus.Details = &metav1.StatusDetails{Name: name, Group: gr.Group, Kind: gr.Resource}
	return e
}
