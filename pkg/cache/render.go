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
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/specdiff"
)

// A location's view shows an object rendered for it: the view without what belongs to other
// locations (baseView), then the Customizations that select the object and the location, in
// name order, then the object's own spec-diff.kcp.io/<location> patch (docs/design.md, "The
// control plane objects"; docs/customization.md). The rendering of each (object version, location) that a
// rule touches is made once and kept (Object.rendered); a location no rule touches shares the
// base view.
//
// Where a rendering is made depends on its cost. An object's own patch alone is rendered when
// the version is stored (a JSON patch: no CEL). A rendering that runs a Customization's CEL is,
// with a Renderer (StoreOptions.Renderer, what mapper-apiserver uses), deferred: the version
// is stored at once for every other location, and the location's rendering is pending
// (Object.pending) until a Renderer worker made it (renderer.go). One tenant's expensive
// Customizations so delay the views of that tenant's objects only, never the ingest of the
// resource (docs/views.md, "Deferred renderings"). While a location's rendering is pending,
// its view keeps showing the previous version's rendering (lastGood), at its visible
// resourceVersion: nothing a view showed is withdrawn or changed because a rendering is slow;
// an object the view never showed is withheld until its first rendering, and a GET answers
// 503 with the reason.
//
// A rendering can fail (a CEL error or cost limit, a result the schema rejects, a malformed
// patch). A failure never removes anything (the safety rule of docs/design.md):
//   - a version whose rendering fails for a location that showed the previous version keeps
//     showing that location the previous rendering (lastGood): no event, the location's visible
//     resourceVersion does not move;
//   - a version that never rendered for a location is withheld from its view: not listed, not
//     watched (no ADDED, and no DELETED since it was never shown), and a GET answers 503 with
//     the reason rather than 404, so that a mapper confirming a deletion through the view
//     (after a restart of mapper-apiserver lost the last rendering) does not delete its copy.

// errRenderingPending is why an object whose first rendering for a location is pending is
// withheld from that location's view.
var errRenderingPending = errors.New("its rendering by the Customizations of its namespace is pending; it shows once rendered")

// renderFor returns a copy of u (a source object of gvr in the logical cluster cluster,
// assigned to locations) as location's view shows it under rules (nil: no Customization, only
// the object's own patch). Whatever produced it, the rendering is then held to
// pkg/rendercheck's rule against the view it started from (checkRendering): it may change
// neither a protected field nor grow past maxBytes (StoreOptions.MaxRenderingBytes). The error
// is a *customization.RenderError (or a *specdiff.Error without rules) when a mutation or the
// patch fails or is refused. ctx may carry a customization.Meter that counts and bounds the CEL
// cost.
//
// A location u is shown to for its finalizer alone (not assigned, deletion.go) sees the base
// view: no rule renders an object for a location it is not assigned to.
func renderFor(ctx context.Context, rules Rules, gvr schema.GroupVersionResource, cluster string, u *unstructured.Unstructured, locations []string, location string, maxBytes int64) (*unstructured.Unstructured, error) {
	if !contract.HasLocation(locations, location) {
		return baseView(u, locations, location), nil
	}
	pre := viewOf(u, locations, location, true)
	var out *unstructured.Unstructured
	var err error
	if rules == nil {
		patch, _ := specdiff.Patch(pre, location)
		out, err = specdiff.Apply(pre, location, patch)
	} else {
		out, err = rules.Render(ctx, gvr, cluster, pre, location)
	}
	if err != nil {
		return nil, err
	}
	if err := checkRendering(pre, out, maxBytes); err != nil {
		return nil, err // the refused rendering is dropped here: nothing keeps it
	}
	return out, nil
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

// runsCEL reports whether rendering o for location under rules runs a Customization: one
// selects it (Rules.Differs against no rules reads selectors only). Such renderings are the
// ones a Renderer defers.
func runsCEL(rules Rules, gvr schema.GroupVersionResource, o *Object, location string) bool {
	return rules != nil && rules.Differs(nil, gvr, o.cluster, o.namespace, o.labels, location)
}

// settleRendering renders o, once per object version before it is published, for each
// location a rule touches, and decides which failing locations keep the last rendering
// (o.lastGood) and which are withheld (left out of o.locations). A location for which deferred
// reports true is not rendered now: its rendering is pending (deferRendering). prev is the
// version stored before o, nil for a new object. maxBytes bounds each rendering (renderFor).
// failed is called for each failing location; a failed rendering is not kept.
func (o *Object) settleRendering(rules Rules, gvr schema.GroupVersionResource, maxBytes int64, prev *Object, deferred func(location string) bool, failed func(location string, err error)) {
	var prevU *unstructured.Unstructured // prev's content, decoded once for every location
	prevView := func(loc string) *unstructured.Unstructured {
		if prev == nil || !prev.HasLocation(loc) {
			return nil
		}
		if prevU == nil {
			prevU = prev.content()
		}
		return prev.renderingOf(prevU, loc)
	}
	for _, loc := range o.assigned {
		if !touches(rules, gvr, o.cluster, o.u, loc) {
			continue
		}
		if deferred != nil && deferred(loc) {
			o.deferRendering(loc, prevView(loc))
			continue
		}
		u, err := renderFor(context.Background(), rules, gvr, o.cluster, o.u, o.assigned, loc, maxBytes)
		if err == nil {
			o.setRendered(loc, u)
			continue
		}
		failed(loc, err)
		o.setFailed(loc, err, prevView(loc))
	}
	o.settleLocations()
}

// setRendered records u as location's rendering of o.
func (o *Object) setRendered(location string, u *unstructured.Unstructured) {
	if o.rendered == nil {
		o.rendered = map[string]*unstructured.Unstructured{}
	}
	o.rendered[location] = u
}

// setFailed records that location's rendering of o fails with err; shown, when not nil, is the
// rendering the location's view showed before, which it keeps showing.
func (o *Object) setFailed(location string, err error, shown *unstructured.Unstructured) {
	if o.failed == nil {
		o.failed = map[string]error{}
	}
	o.failed[location] = err
	o.keepShowing(location, shown)
}

// deferRendering records that location's rendering of o is pending; shown, when not nil, is the
// rendering the location's view showed before, which it shows meanwhile.
func (o *Object) deferRendering(location string, shown *unstructured.Unstructured) {
	if o.failed == nil {
		o.failed = map[string]error{}
	}
	o.failed[location] = errRenderingPending
	o.keepShowing(location, shown)
}

// pending reports whether location's rendering of o is deferred and not made yet.
func (o *Object) pending(location string) bool { return o.failed[location] == errRenderingPending }

// pendingLocations returns the locations whose rendering of o is pending, in order.
func (o *Object) pendingLocations() []string {
	var out []string
	for loc, err := range o.failed {
		if err == errRenderingPending {
			out = append(out, loc)
		}
	}
	slices.Sort(out)
	return out
}

// keepShowing records shown (nil: none) as the rendering location's view keeps showing instead
// of this version's own.
func (o *Object) keepShowing(location string, shown *unstructured.Unstructured) {
	if shown == nil {
		return
	}
	if o.lastGood == nil {
		o.lastGood = map[string]*unstructured.Unstructured{}
	}
	o.lastGood[location] = shown
}

// settleLocations computes which locations o is shown to after its renderings were decided
// (assigned minus withheld, plus the locations that see it for their finalizer alone:
// deletion.go), and makes o keep per-location views when any location has a rendering of its
// own.
func (o *Object) settleLocations() {
	shown := o.assigned
	if slices.ContainsFunc(o.assigned, func(l string) bool { return o.withheld(l) != nil }) {
		shown = slices.DeleteFunc(slices.Clone(o.assigned), func(l string) bool { return o.withheld(l) != nil })
		if len(shown) == 0 {
			shown = nil
		}
	}
	o.locations = o.marks.viewLocations(o.assigned, shown)
	o.ensureVariants()
}

// ensureVariants makes o keep per-location views when a location has a rendering of its own
// (or keeps an earlier one), so that ForLocation shows it rather than o's content.
func (o *Object) ensureVariants() {
	if (o.rendered != nil || o.lastGood != nil || o.failed != nil) && o.variants == nil {
		o.variants = &locationVariants{}
	}
}

// view returns location's rendering of o, a copy the caller owns: the rendering made when o
// was stored, or when it failed or is pending the last rendering shown (its
// metadata.resourceVersion is the source's of the version it rendered: renderedFrom;
// ForLocation shows the visible one), or for a location no rule touches (and a location o is withheld from,
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

// selectable returns what a label or field selector of a watch or list of location is matched
// against for o: location's view of o when it may show other labels than o (a rendering of its
// own, which a Customization may relabel, or an earlier version's that it keeps while its own
// fails or is pending), else o itself (its labels are the view's: no view to look up). So a
// selector matches what the view shows, and a watch sees an object enter or leave its
// selection exactly when the view changes: a new version whose labels changed but whose
// rendering is pending changes nothing for a selector until it is rendered.
func (o *Object) selectable(location string) *Object {
	if o.rendered[location] == nil && o.lastGood[location] == nil {
		return o
	}
	return o.ForLocation(location)
}

// withheld returns the error that keeps this version out of location's view (its rendering
// fails, or is pending, and no earlier version rendered), nil if none.
func (o *Object) withheld(location string) error {
	if o.lastGood[location] != nil {
		return nil
	}
	return o.failed[location]
}

// Withheld returns the error that keeps this version out of location's view (its rendering
// fails, or is pending, and no earlier version rendered), nil if none.
func (o *Object) Withheld(location string) error { return o.withheld(location) }

// WithheldError returns, when the object namespace/name assigned to location (in the logical
// cluster cluster, or in any when cluster is "") is withheld from location's view, the 503 a
// GET answers instead of 404: the object exists and is assigned, but cannot be shown as it
// would land on the target. On a closed store (the resource left the source, or the server is
// shutting down and its cache stopped) it returns the store's 503 for every object: a GET that
// found the store open and missed the object once Close emptied it must not answer 404, which
// a mapper takes for "gone" (mapper.GoneFromView). nil otherwise.
func (s *ResourceStore) WithheldError(location, cluster, namespace, name string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return s.closedError()
	}
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
	// GVR is the object's resource, GVK its kind.
	GVR schema.GroupVersionResource
	GVK schema.GroupVersionKind
	// Cluster, Namespace and Name identify the object; UID and ResourceVersion are the failing
	// version's (for an Event about it).
	Cluster, Namespace, Name string
	UID                      types.UID
	ResourceVersion          string
	// Location is the location whose rendering fails.
	Location string
	// Withheld is true when the location never rendered the object (it is not in its view);
	// false when the view keeps the last rendering that succeeded.
	Withheld bool
	// Err is the failure: a *customization.RenderError, or a *specdiff.Error. A refusal of
	// pkg/rendercheck wraps a *rendercheck.Refusal (RenderFailure.Refusal).
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
			if err == errRenderingPending {
				continue
			}
			out = append(out, RenderFailure{GVR: s.gvr, GVK: s.gvk, Cluster: o.cluster, Namespace: o.namespace, Name: o.name,
				UID: o.uid, ResourceVersion: o.rvString, Location: loc, Withheld: o.lastGood[loc] == nil, Err: err})
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
