package dependencies

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/managedfields"
	ctrlplacement "github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/served"
	"github.com/cluster-mapper/cluster-mapper/pkg/dependencies"
	"github.com/cluster-mapper/cluster-mapper/pkg/placement"
)

// errNotSynced ends a round that found an informer it needs not synced yet.
var errNotSynced = errors.New("an informer has not synced")

// placementInfo is one Placement of the namespace being reconciled.
type placementInfo struct {
	u      *unstructured.Unstructured
	status controlv1alpha1.PlacementStatus
	live   bool
	// policy is the compiled spec; nil when it does not compile.
	policy *placement.Policy
}

// referrer is one assigned object that references dependencies.
type referrer struct {
	obj *unstructured.Unstructured
	// placement is the Placement that placed it (control.mapper.kcp.io/placement), "" when none.
	placement string
	// locations are its assigned locations and those whose finalizer it still carries.
	locations []string
}

// need is what one referenced object needs.
type need struct {
	ref       dependencies.Reference
	required  bool
	locations sets.Set[string]
	referrers []*referrer
}

// dep is one dependency of the round: a referenced object, or an object carrying this
// controller's record that nothing references any more.
type dep struct {
	gvr       schema.GroupVersionResource
	gvk       schema.GroupVersionKind
	obj       metav1.Object
	need      sets.Set[string]
	referrers []*referrer
}

// report is what a Placement's status says about the dependencies of its objects.
type report struct {
	missing    int64
	unmirrored sets.Set[string]
}

// round is one reconcile of a namespace.
type round struct {
	cluster, namespace string
	placements         map[string]*placementInfo
	locations          map[string]placement.Location
	// frozen: the references of some referencing object are unknown, so no dependency
	// loses a location this round.
	frozen   bool
	needs    map[string]*need
	deps     map[string]*dep
	missing  []*need
	failures map[string]map[string]string
	reports  map[string]*report
	// kept are the reported Event keys this round found still true (besides the missing).
	kept sets.Set[string]
	// selected are the label selections of ResourceMappings' entries, resolved once the
	// referrers are known (resolveSelections).
	selected []selection
}

// selection is a label selection of an entry of origin Source, found from ref's object: the
// objects it selects need locations.
type selection struct {
	sel       dependencies.Selection
	locations []string
	ref       *referrer
}

// refKey is the key of a referenced object in a round: resource/name.
func refKey(gr schema.GroupResource, name string) string { return gr.String() + "/" + name }

// reconcile assigns the dependencies of one namespace (key: see key). Preconditions of every
// removal of a location (a comment at each step says which): every informer the round reads
// has synced (or cannot list, which freezes removals), and the references of every assigned
// referencing object are known.
func (c *Controller) reconcile(ctx context.Context, k string) error {
	err := c.sync(ctx, k)
	if errors.Is(err, errNotSynced) {
		c.queue.AddAfter(k, time.Second)
		return nil
	}
	return err
}

// sync is reconcile's body; errNotSynced when an informer has not synced yet.
func (c *Controller) sync(ctx context.Context, k string) error {
	cluster, namespace := splitKey(k)
	f := c.fixedInformers()
	if f == nil || !c.placements.HasSynced() || !c.targets.HasSynced() {
		return errNotSynced
	}
	for _, w := range f.all() {
		if !w.informer.HasSynced() && !c.listFailed(w.gvr, true, w.informer) && !c.listFailed(w.gvr, false, w.informer) {
			return errNotSynced
		}
	}
	informersSynced.Set(1)
	r := &round{cluster: cluster, namespace: namespace, needs: map[string]*need{}, deps: map[string]*dep{},
		failures: map[string]map[string]string{}, reports: map[string]*report{}}
	resources, err := c.referencingResources(f, r)
	if err != nil {
		return err
	}
	r.placements = c.placementsOf(cluster, namespace)
	r.locations = c.locations.ByName()
	selectors, err := c.selectors(f, r)
	if err != nil {
		return err
	}

	// What the assigned objects reference, and where.
	for _, rr := range resources {
		objs, err := rr.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok || u.GetAnnotations()[contract.ClusterAnnotation] != cluster {
				continue
			}
			c.addReferrer(ctx, r, rr, u, selectors)
		}
	}
	if err := c.resolveSelections(f, r); err != nil {
		return err
	}

	// The referenced objects, and the objects this controller assigned that nothing
	// references any more.
	for key, n := range r.needs {
		w, err := c.dependencyInformer(f, n.ref.Resource)
		if served.IsNotServed(err) {
			if n.required {
				r.missing = append(r.missing, n)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("finding the version of %s, referenced in namespace %s: %w", n.ref.Resource, namespace, err)
		}
		if !w.informer.HasSynced() {
			if c.listFailed(w.gvr, false, w.informer) {
				// Cannot be read: neither written nor reported missing.
				continue
			}
			return errNotSynced
		}
		obj, exists, err := w.informer.GetIndexer().GetByKey(namespace + "/" + n.ref.Name)
		if err != nil {
			return err
		}
		var o metav1.Object
		if exists {
			if o, err = meta.Accessor(obj); err != nil || o.GetAnnotations()[contract.ClusterAnnotation] != cluster {
				exists = false
			}
		}
		if !exists {
			if n.required {
				r.missing = append(r.missing, n)
			}
			continue
		}
		r.deps[key] = &dep{gvr: w.gvr, gvk: w.gvk, obj: o, need: n.locations, referrers: n.referrers}
	}
	for _, w := range c.allDependencyInformers(f) {
		if !w.informer.HasSynced() {
			if c.listFailed(w.gvr, false, w.informer) {
				continue
			}
			// Precondition of the removals below: the informer has synced.
			return errNotSynced
		}
		objs, err := w.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			o, err := meta.Accessor(obj)
			if err != nil || o.GetAnnotations()[contract.ClusterAnnotation] != cluster {
				continue
			}
			if _, recorded := o.GetAnnotations()[LocationsAnnotation]; !recorded {
				continue
			}
			if k := refKey(w.gvr.GroupResource(), o.GetName()); r.deps[k] == nil {
				r.deps[k] = &dep{gvr: w.gvr, gvk: w.gvk, obj: o, need: sets.New[string]()}
			}
		}
	}

	var writes []*write
	for _, d := range r.deps {
		if w := c.decide(ctx, r, d); w != nil {
			writes = append(writes, w)
		}
	}
	slices.SortFunc(writes, func(a, b *write) int { return compareWrites(a, b) })
	c.limit.Each(ctx, len(writes),
		func(i int) { writes[i].err = c.applyWrite(ctx, writes[i]) },
		func(i int, err error) { writes[i].err = err })
	var failed []error
	for _, w := range writes {
		switch {
		case w.err == nil:
			klog.FromContext(ctx).V(2).Info("Dependency assigned", "resource", w.gvr.GroupResource().String(), "namespace", namespace, "name", w.obj.GetName(),
				"locations", w.assigned, "added", w.added)
		case apierrors.IsNotFound(w.err):
		default:
			// A conflict (the object changed since the informer's copy) is retried with the
			// next round, from the newer copy.
			failed = append(failed, fmt.Errorf("assigning %s %s/%s: %w", w.gvr.GroupResource(), namespace, w.obj.GetName(), w.err))
		}
	}

	c.reportMissing(r)
	c.reportUnmirrored(r)
	c.recordRuleFailures(k, r.failures)
	if err := c.writeReports(ctx, r); err != nil {
		failed = append(failed, err)
	}
	return errors.Join(failed...)
}

// referencingResources returns the resources whose objects reference others in this round:
// the Pod template kinds and the resources of the DependencyRules of r's cluster, with the
// rules of each. A resource whose informer cannot list freezes removals (r.frozen);
// errNotSynced when one has not synced yet.
func (c *Controller) referencingResources(f *fixedInformers, r *round) ([]referencing, error) {
	byGVR := map[schema.GroupVersionResource]*referencing{}
	var out []*referencing
	for _, w := range f.templates {
		rr := &referencing{gvr: w.gvr, template: true, watched: w}
		byGVR[w.gvr] = rr
		out = append(out, rr)
	}
	// of returns the referencing resource gvr, whose objects an expression reads whole
	// (informer), added on first use.
	of := func(gvr schema.GroupVersionResource, informer toolscache.SharedIndexInformer) *referencing {
		rr := byGVR[gvr]
		if rr == nil {
			rr = &referencing{gvr: gvr, watched: watched{gvr: gvr, informer: informer}}
			byGVR[gvr] = rr
			out = append(out, rr)
		} else {
			// An expression reads the whole object, which the trimmed informer of a Pod
			// template kind does not hold.
			rr.informer = informer
		}
		return rr
	}
	if ok, err := c.controlObjectsReadable(r, RuleResource, c.rules); err != nil {
		return nil, err
	} else if ok {
		rules, err := c.currentRules(r.cluster)
		if err != nil {
			return nil, err
		}
		for _, rs := range rules {
			if rs.informer == nil {
				continue // not served: the rule has no objects
			}
			rr := of(rs.gvr, rs.informer)
			rr.rules = append(rr.rules, rs)
		}
	}
	if ok, err := c.controlObjectsReadable(r, MappingResource, c.mappings); err != nil {
		return nil, err
	} else if ok {
		mappings, err := c.currentMappings(r.cluster)
		if err != nil {
			return nil, err
		}
		for _, ms := range mappings {
			rr := of(ms.gvr, ms.informer)
			rr.related = append(rr.related, ms.entries...)
		}
	}
	var ready []referencing
	for _, rr := range out {
		if !rr.informer.HasSynced() {
			if c.listFailed(rr.gvr, true, rr.informer) {
				// Its objects' references are unknown.
				r.frozen = true
				continue
			}
			return nil, errNotSynced
		}
		ready = append(ready, *rr)
	}
	return ready, nil
}

// controlObjectsReadable reports whether the control objects of informer (DependencyRules,
// ResourceMappings: gvr) can be read this round: true once it has synced; false when their CRD
// is not installed (there are none) or they cannot be listed (403: r is frozen, since what
// they would make follow is unknown); errNotSynced while it has not synced otherwise.
func (c *Controller) controlObjectsReadable(r *round, gvr schema.GroupVersionResource, informer toolscache.SharedIndexInformer) (bool, error) {
	switch {
	case informer.HasSynced():
		return true, nil
	case apierrors.IsNotFound(c.informers.ListError(gvr, true)):
		return false, nil
	case c.listFailed(gvr, true, informer):
		r.frozen = true
		return false, nil
	default:
		return false, errNotSynced
	}
}

// selectors returns the Services, HPAs and PDBs of r's namespace and cluster, parsed.
func (c *Controller) selectors(f *fixedInformers, r *round) (*dependencies.Selectors, error) {
	var lists [3][]*unstructured.Unstructured
	for i, w := range []*watched{f.services, f.hpas, f.pdbs} {
		if w == nil {
			continue
		}
		if !w.informer.HasSynced() {
			if c.listFailed(w.gvr, true, w.informer) {
				r.frozen = true
				continue
			}
			return nil, errNotSynced
		}
		objs, err := w.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, r.namespace)
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			if u, ok := obj.(*unstructured.Unstructured); ok && u.GetAnnotations()[contract.ClusterAnnotation] == r.cluster {
				lists[i] = append(lists[i], u)
			}
		}
	}
	return c.parsed.Selectors(lists[0], lists[1], lists[2]), nil
}

// addReferrer adds what u, an object of rr, references to r's needs, unless u is assigned
// nowhere (and carries no location's finalizer) or opted out: by its annotation
// control.mapper.kcp.io/dependencies: Ignore, or by its Placement's spec.dependencies: Ignore.
// When its references are unknown r is frozen.
func (c *Controller) addReferrer(ctx context.Context, r *round, rr referencing, u *unstructured.Unstructured, selectors *dependencies.Selectors) {
	ann := u.GetAnnotations()
	locations := locationsOf(u)
	if len(locations) == 0 || ann[contract.DependenciesAnnotation] == contract.DependenciesIgnore {
		return
	}
	owner := ann[ctrlplacement.OwnerAnnotation]
	if p := r.placements[owner]; p != nil && p.policy != nil && p.policy.IgnoreDependencies {
		return
	}
	refs, related, ok := c.references(ctx, rr, u, selectors, r.failures)
	if !ok {
		r.frozen = true
	}
	ref := &referrer{obj: u, placement: owner, locations: locations}
	for _, d := range refs {
		r.addNeed(d, locations, ref)
	}
	for _, f := range related {
		// Only where the mapping applies: each location's mapper maps by the mappings of its
		// own view (docs/resourcemapping.md, "Related objects: origin Source").
		within := sets.List(f.within.Intersection(sets.New(locations...)))
		switch {
		case len(within) == 0:
		case f.sel.Name != "":
			r.addNeed(dependencies.Reference{Resource: f.sel.Resource, Name: f.sel.Name}, within, ref)
		default:
			r.selected = append(r.selected, selection{sel: f.sel, locations: within, ref: ref})
		}
	}
}

// addNeed records that ref's object references d and needs it at locations.
func (r *round) addNeed(d dependencies.Reference, locations []string, ref *referrer) {
	k := refKey(d.Resource, d.Name)
	n := r.needs[k]
	if n == nil {
		n = &need{ref: d, locations: sets.New[string]()}
		r.needs[k] = n
	}
	n.required = n.required || !d.Optional
	n.locations.Insert(locations...)
	n.referrers = append(n.referrers, ref)
}

// resolveSelections adds a need of every object of r's namespace and cluster that a label
// selection of r selects (an optional one: a selector that selects nothing reports nothing
// missing). A resource the source does not serve selects nothing; one whose informer cannot
// list is left out (its objects are neither written nor, since the informer is not synced,
// unassigned). errNotSynced while an informer has not synced.
func (c *Controller) resolveSelections(f *fixedInformers, r *round) error {
	for _, s := range r.selected {
		w, err := c.dependencyInformer(f, s.sel.Resource)
		if served.IsNotServed(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("finding the version of %s, related in namespace %s: %w", s.sel.Resource, r.namespace, err)
		}
		if !w.informer.HasSynced() {
			if c.listFailed(w.gvr, false, w.informer) {
				continue
			}
			return errNotSynced
		}
		objs, err := w.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, r.namespace)
		if err != nil {
			return err
		}
		selector := labels.SelectorFromValidatedSet(s.sel.Labels)
		for _, obj := range objs {
			o, err := meta.Accessor(obj)
			if err != nil || o.GetAnnotations()[contract.ClusterAnnotation] != r.cluster || !selector.Matches(labels.Set(o.GetLabels())) {
				continue
			}
			r.addNeed(dependencies.Reference{Resource: s.sel.Resource, Name: o.GetName(), Optional: true}, s.locations, s.ref)
		}
	}
	return nil
}

// locationsOf returns the locations obj is assigned to (an assignment that does not parse is
// none, as for the views) and those whose finalizer it still carries (its copy there is not
// gone yet), sorted.
func locationsOf(obj metav1.Object) []string {
	out := sets.New[string]()
	if v, ok := obj.GetAnnotations()[contract.AssignedLocationsAnnotation]; ok {
		if locs, err := contract.ParseLocations(v); err == nil {
			out.Insert(locs...)
		}
	}
	for _, f := range obj.GetFinalizers() {
		if l, ok := contract.FinalizerLocation(f); ok {
			out.Insert(l)
		}
	}
	return sets.List(out)
}

// placementsOf returns the Placements of the namespace, by name, compiled.
func (c *Controller) placementsOf(cluster, namespace string) map[string]*placementInfo {
	out := map[string]*placementInfo{}
	objs, _ := c.placements.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GetAnnotations()[contract.ClusterAnnotation] != cluster {
			continue
		}
		p := &placementInfo{u: u, live: u.GetDeletionTimestamp() == nil}
		var pl controlv1alpha1.Placement
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pl) == nil {
			p.status = pl.Status
			p.policy, _ = placement.Compile(&pl.Spec)
		}
		out[u.GetName()] = p
	}
	return out
}

// placedBy returns the Placement that places o, of resource gvr: the one its
// control.mapper.kcp.io/placement names, when it exists, or a live one that selects it (it
// will place it). "" when none: the dependency controller may assign it.
func placedBy(r *round, gvr schema.GroupVersionResource, o metav1.Object) string {
	if owner := o.GetAnnotations()[ctrlplacement.OwnerAnnotation]; owner != "" && r.placements[owner] != nil {
		return owner
	}
	for name, p := range r.placements {
		if !p.live || p.policy == nil || !p.policy.SelectsObject(o.GetLabels()) {
			continue
		}
		if slices.ContainsFunc(p.policy.Resources, func(res schema.GroupVersionResource) bool { return res.GroupResource() == gvr.GroupResource() }) {
			return name
		}
	}
	return ""
}

// decide returns the patch that makes d carry the locations it needs, or nil when it does or
// may not be written:
//   - an object being deleted, one a Placement places (placedBy), and one whose last write the
//     informer has not delivered yet (pending) are not written;
//   - an assignment that does not parse is left alone;
//   - the locations this controller added are those of its record when its field manager
//     owns the record (managedFields), none otherwise; the others are someone else's (base)
//     and stay;
//   - the object gets base plus every location it needs; a recorded location it no longer
//     needs leaves only when the round is not frozen. Preconditions of that removal: every
//     informer read has synced (sync), the references of every assigned referencing object
//     of the namespace are known (not frozen), and no referencing object is assigned there
//     or carries that location's finalizer (d.need, locationsOf).
func (c *Controller) decide(ctx context.Context, r *round, d *dep) *write {
	o := d.obj
	if o.GetDeletionTimestamp() != nil || c.pending.Stale(o) {
		return nil
	}
	if p := placedBy(r, d.gvr, o); p != "" {
		c.reportPlacedElsewhere(r, d, p)
		return nil
	}
	ann := o.GetAnnotations()
	var current []string
	if v, ok := ann[contract.AssignedLocationsAnnotation]; ok {
		locs, err := contract.ParseLocations(v)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Not assigning a dependency whose assignment does not parse", "resource", d.gvr.GroupResource().String(),
				"namespace", r.namespace, "name", o.GetName(), "err", err)
			return nil
		}
		current = locs
	}
	prev := sets.New[string]()
	record, recorded := ann[LocationsAnnotation]
	owned := recorded && managedfields.OwnedAnnotations(o, FieldManager).Has(LocationsAnnotation)
	if owned {
		if locs, err := contract.ParseLocations(record); err == nil {
			prev.Insert(locs...)
		}
	}
	base := sets.New(current...).Difference(prev)
	added := d.need.Difference(base)
	if r.frozen {
		added = added.Union(prev)
	}
	want := base.Union(added)
	if want.Equal(sets.New(current...)) && added.Equal(prev) && (added.Len() > 0 || !owned) {
		return nil
	}
	return &write{gvr: d.gvr, gvk: d.gvk, obj: o, assigned: sets.List(want), added: sets.List(added), removes: !want.IsSuperset(sets.New(current...))}
}
