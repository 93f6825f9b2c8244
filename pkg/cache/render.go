package cache

import (
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/specdiff"
)

// A location's view shows an object rendered for it (RenderView): today its own
// spec-diff.kcp.io/<location> patch applied. A rendering can fail (a malformed patch, a test
// operation that does not hold, a path that does not exist). A failure never removes anything
// (issue 14 item 4, the safety rule of DESIGN.md):
//   - a version whose rendering fails for a location that showed the previous version keeps
//     showing that location the previous rendering (lastGood): no event, the location's visible
//     resourceVersion does not move;
//   - a version that never rendered for a location is withheld from its view: not listed, not
//     watched (no ADDED, and no DELETED since it was never shown), and a GET answers 503 with
//     the reason rather than 404, so that a mapper confirming a deletion through the view
//     (after a restart of mapper-apiserver lost the last rendering) does not delete its copy.

// settleRendering decides, once per object version before it is published, which locations
// whose patch fails on o keep the last rendering (o.lastGood) and which are withheld
// (o.withheld, and left out of o.locations). prev is the version stored before o, nil for a new
// object. failed is called for each failing location.
func (o *Object) settleRendering(prev *Object, failed func(location string, err error)) {
	for _, loc := range o.assigned {
		if !specdiff.Has(o.u, loc) {
			continue
		}
		_, err := RenderView(o.u, o.assigned, loc)
		if err == nil {
			continue
		}
		failed(loc, err)
		if prev != nil && prev.HasLocation(loc) {
			if o.lastGood == nil {
				o.lastGood = map[string]*unstructured.Unstructured{}
			}
			o.lastGood[loc] = prev.renderedFor(loc)
			continue
		}
		if o.withheld == nil {
			o.withheld = map[string]error{}
		}
		o.withheld[loc] = err
	}
	if len(o.withheld) > 0 {
		o.locations = slices.DeleteFunc(slices.Clone(o.assigned), func(l string) bool { return o.withheld[l] != nil })
		if len(o.locations) == 0 {
			o.locations = nil
		}
	}
}

// view returns location's rendering of o, a copy the caller owns: RenderView, or when that
// fails the last rendering that succeeded (resourceVersion included: ForLocation sets it), or
// as a last resort the view without the patch (a location o is withheld from, which is never
// served).
func (o *Object) view(location string) *unstructured.Unstructured {
	u, err := RenderView(o.u, o.assigned, location)
	if err == nil {
		return u
	}
	if lg := o.lastGood[location]; lg != nil {
		return lg.DeepCopy()
	}
	return baseView(o.u, o.assigned, location)
}

// Withheld returns the error that keeps this version out of location's view (its
// spec-diff.kcp.io/<location> patch fails and no earlier version rendered), nil if none.
func (o *Object) Withheld(location string) error { return o.withheld[location] }

// WithheldError returns, when the object namespace/name assigned to location (in the logical
// cluster cluster, or in any when cluster is "") is withheld from location's view, the 503 a
// GET answers instead of 404: the object exists and is assigned, but cannot be shown as it
// would land on the target. nil otherwise.
func (s *ResourceStore) WithheldError(location, cluster, namespace, name string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, o := range s.withheldObjects {
		if o.namespace != namespace || o.name != name || (cluster != "" && o.cluster != cluster) {
			continue
		}
		if err := o.withheld[location]; err != nil {
			return withheldError(s.gvr.GroupResource(), name, location, err)
		}
	}
	return nil
}

// withheldError builds the 503 of a withheld object. It carries no Retry-After: client-go
// retries a 503 with Retry-After by itself (up to 10 times), which would hold a mapper's
// deletion check or kubectl for minutes; the object shows once its patch is fixed, which no
// retry interval predicts.
func withheldError(gr schema.GroupResource, name, location string, err error) error {
	msg := strings.TrimSpace(err.Error())
	e := apierrors.NewServiceUnavailable(
		"the " + gr.String() + " \"" + name + "\" is assigned to location \"" + location +
			"\" but is withheld from its view: " + msg)
	e.ErrStatus.Details = &metav1.StatusDetails{Name: name, Group: gr.Group, Kind: gr.Resource}
	return e
}
