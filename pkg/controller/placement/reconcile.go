package placement

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/managedfields"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/pending"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/served"
	"github.com/cluster-mapper/cluster-mapper/pkg/placement"
)

// entry is one Placement of the namespace being reconciled, with what this round found.
type entry struct {
	u      *unstructured.Unstructured
	pl     controlv1alpha1.Placement
	policy *placement.Policy
	err    error // the spec does not compile
	pool   placement.Pool
	live   bool // not being deleted
	// unbound are the locations the Placement selects that are not bound to its namespace
	// (bound.go), sorted.
	unbound []string
	// locs are the candidate locations by name (candidates), for what their views mirror.
	locs map[string]placement.Location
	// unserved are the candidate locations whose mappers report resources their targets do
	// not serve compatibly (placement.Location.Unserved); usually none.
	unserved []placement.Location
	// skipped are the matching locations kept from new work because their targets do not
	// serve a placed resource compatibly (compatible.go): location → "resource (reason)".
	skipped map[string]sets.Set[string]

	// notServed are the errors of the resources the source does not serve.
	notServed []string
	// members are the objects it places this round, in resource and name order.
	members []*member

	placed     int64
	groups     sets.Set[string] // the keys of the groups with a placed object
	locations  sets.Set[string]
	stuck      sets.Set[string]
	unmirrored sets.Set[string] // placed resources some of whose locations' views lack them
	conflicts  []controlv1alpha1.PlacementConflict
	lost       int // selected objects it does not place (conflicts other than YoungerPlacement)
}

// member is one object a Placement places, with what placing it needs.
type member struct {
	gvr schema.GroupVersionResource
	gvk schema.GroupVersionKind
	obj metav1.Object
	// current are the locations of its assignment (written by a Placement), parsed.
	current []string
	// replicas is its spec.replicas (Divide only).
	replicas int64
}

// conflict records a conflict on e.
func (e *entry) conflict(gr schema.GroupResource, name, reason, message string) {
	e.conflicts = append(e.conflicts, controlv1alpha1.PlacementConflict{Resource: gr.String(), Name: name, Reason: reason, Message: message})
	if reason != controlv1alpha1.ConflictYoungerPlacement {
		e.lost++
	}
}

// selects reports whether e is a live Placement with a valid spec that selects obj of gvr.
func (e *entry) selects(gvr schema.GroupVersionResource, obj metav1.Object) bool {
	return e.live && e.policy != nil && slices.Contains(e.policy.Resources, gvr) && e.policy.SelectsObject(obj.GetLabels())
}

// name is the Placement's namespace/name, for messages and logs.
func (e *entry) name() string { return e.pl.Namespace + "/" + e.pl.Name }

// placedOn records that an object of resource gr in group is placed on locations.
func (e *entry) placedOn(gr schema.GroupResource, group string, locations []string) {
	e.placed++
	e.groups.Insert(group)
	e.locations.Insert(locations...)
	for _, l := range locations {
		if loc, ok := e.locs[l]; ok && !loc.Mirrors(gr.String()) {
			e.unmirrored.Insert(gr.String())
		}
	}
}

// watchedResource is a resource of a namespace's Placements that the source serves, with its
// kind and informer.
type watchedResource struct {
	gvr      schema.GroupVersionResource
	gvk      schema.GroupVersionKind
	informer toolscache.SharedIndexInformer
}

// reconcile places the objects of one namespace (key: see key) for all its Placements, then
// writes their statuses and finalizers. It writes nothing before the SyncTarget and object
// informers have synced: an unsynced cache must not unassign anything. A resource that the
// source does not serve is reported on the Placements naming it (Ready=False,
// ResourceNotServed) and is left out: it blocks neither them nor the other Placements.
func (c *Controller) reconcile(ctx context.Context, k string) error {
	cluster, namespace := splitKey(k)
	now := c.now().Truncate(time.Second)
	entries := c.entries(cluster, namespace, now)
	if len(entries) == 0 {
		return nil
	}
	resources, err := c.resources(entries)
	if err != nil {
		return err
	}
	for _, r := range resources {
		if !r.informer.HasSynced() {
			c.queue.AddAfter(k, time.Second)
			return nil
		}
	}
	byName := map[string]*entry{}
	for _, e := range entries {
		byName[e.pl.Name] = e
	}
	var writes []*write
	for _, r := range resources {
		stored, err := r.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
		if err != nil {
			return err
		}
		objs := make([]metav1.Object, 0, len(stored))
		for _, obj := range stored {
			if o, err := meta.Accessor(obj); err == nil {
				objs = append(objs, o)
			}
		}
		slices.SortFunc(objs, func(a, b metav1.Object) int { return strings.Compare(a.GetName(), b.GetName()) })
		for _, o := range objs {
			if o.GetDeletionTimestamp() != nil || o.GetAnnotations()[contract.ClusterAnnotation] != cluster {
				continue
			}
			if w := c.selectObject(r, o, entries, byName); w != nil {
				writes = append(writes, w)
			}
		}
	}
	for _, e := range entries {
		writes = append(writes, e.place(cluster, namespace, c.pending)...)
	}
	c.applyAll(ctx, writes)
	for _, w := range writes {
		if err := w.record(ctx); err != nil {
			return err
		}
	}

	var next time.Time
	for _, e := range entries {
		if !e.live {
			if err := c.finish(ctx, e); err != nil {
				return err
			}
			continue
		}
		if err := c.writeStatus(ctx, e); err != nil {
			return err
		}
		if n := e.pool.Next; !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	if !next.IsZero() {
		// Time alone changes the choices then: a tolerance runs out, or an evicted
		// location may be re-admitted.
		c.queue.AddAfter(k, next.Sub(c.now())+100*time.Millisecond)
	}
	return nil
}

// resources returns the resources of every Placement of entries, the deleting ones too (their
// assignments go), that the source serves, each with its informer: the whole objects of a
// resource that a Placement divides (spec.replicas) or that is watched whole anyway, the
// metadata of the others, which costs the source, the watch and the informer a fraction of
// the bytes. A resource the source does not serve is recorded on the entries naming it; an
// error reading discovery is returned (the round is retried).
func (c *Controller) resources(entries []*entry) ([]watchedResource, error) {
	var gvrs []schema.GroupVersionResource
	divided := sets.New[schema.GroupVersionResource]()
	for _, e := range entries {
		if e.policy == nil {
			continue
		}
		for _, gvr := range e.policy.Resources {
			if !slices.Contains(gvrs, gvr) {
				gvrs = append(gvrs, gvr)
			}
			if e.policy.Divide {
				divided.Insert(gvr)
			}
		}
	}
	var out []watchedResource
	for _, gvr := range gvrs {
		gvk, err := c.resolver.Kind(gvr)
		if served.IsNotServed(err) {
			for _, e := range entries {
				if e.policy != nil && slices.Contains(e.policy.Resources, gvr) {
					e.notServed = append(e.notServed, err.Error())
				}
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("finding the kind of %s, a resource of the Placements of %s: %w", gvr, entries[0].pl.Namespace, err)
		}
		// Whole objects, once watched, serve every namespace.
		out = append(out, watchedResource{gvr: gvr, gvk: gvk, informer: c.watch(gvr, divided.Has(gvr) || c.watchesFull(gvr))})
	}
	return out, nil
}

// entries returns the Placements of the namespace, oldest first (creation, then name), each
// compiled, with its pool of the namespace's candidate locations at now.
func (c *Controller) entries(cluster, namespace string, now time.Time) []*entry {
	objs, _ := c.placements.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
	if len(objs) == 0 {
		// Most object events come from namespaces without Placements.
		return nil
	}
	locs, unbound := c.candidates(cluster, namespace)
	byName := make(map[string]placement.Location, len(locs))
	var unserved []placement.Location
	for _, l := range locs {
		byName[l.Name] = l
		if len(l.Unserved) > 0 {
			unserved = append(unserved, l)
		}
	}
	var out []*entry
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GetAnnotations()[contract.ClusterAnnotation] != cluster {
			continue
		}
		e := &entry{u: u, live: u.GetDeletionTimestamp() == nil, locs: byName, unserved: unserved,
			groups: sets.New[string](), locations: sets.New[string](), stuck: sets.New[string](), unmirrored: sets.New[string]()}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &e.pl); err != nil {
			e.err = err
		} else if e.policy, e.err = placement.Compile(&e.pl.Spec); e.err == nil {
			evictions := map[string]time.Time{}
			for _, ev := range e.pl.Status.Evictions {
				evictions[ev.Location] = ev.Time.Time
			}
			e.pool = e.policy.Pool(locs, evictions, now)
			for _, l := range unbound {
				if e.policy.MatchesLocation(l) {
					e.unbound = append(e.unbound, l.Name)
				}
			}
			slices.Sort(e.unbound)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *entry) int {
		if c := a.u.GetCreationTimestamp().Compare(b.u.GetCreationTimestamp().Time); c != 0 {
			return c
		}
		return strings.Compare(a.u.GetName(), b.u.GetName())
	})
	return out
}

// candidates returns the locations the Placements of the namespace (in cluster) may choose
// from: every registered location bound to the namespace (bound.go; in the Open mode every
// registered location), and the registered locations that are not (unbound), which a
// Placement selecting them only reports. This is the one place that narrows them for a
// namespace; callers must not modify the slices.
func (c *Controller) candidates(cluster, namespace string) (bound, unbound []placement.Location) {
	return c.boundOnly(cluster, namespace, c.locations.List())
}

// selectObject finds the Placement that places obj, of resource r: the oldest that selects it,
// and adds the object to its members; the younger ones that select it too, and those whose
// object someone else assigned, record a conflict. An object that no Placement selects loses
// an assignment a Placement of the namespace wrote, and selectObject returns that write,
// under these preconditions: the informers have synced (reconcile), the owner Placement exists
// and its spec compiles, and its field manager owns annotations on the object. An assignment
// naming a Placement that no longer exists stays. obj is the whole object
// (*unstructured.Unstructured) when a Placement divides its resource (reconcile), its metadata
// otherwise.
func (c *Controller) selectObject(r watchedResource, obj metav1.Object, entries []*entry, byName map[string]*entry) *write {
	gr := r.gvr.GroupResource()
	ann := obj.GetAnnotations()
	owner := ann[OwnerAnnotation]
	var selecting []*entry
	for _, e := range entries {
		if e.selects(r.gvr, obj) {
			selecting = append(selecting, e)
		}
	}
	if len(selecting) == 0 {
		prev := byName[owner]
		// A Placement whose spec does not compile selects nothing; its objects stay where they
		// are rather than lose their assignments to a typo.
		if owner == "" || prev == nil || prev.policy == nil || managedfields.OwnedAnnotations(obj, FieldManager).Len() == 0 || c.pending.Stale(obj) {
			return nil
		}
		return &write{gvr: r.gvr, gvk: r.gvk, obj: obj, owner: owner}
	}
	assigned, hasAssignment := ann[contract.AssignedLocationsAnnotation]
	if hasAssignment && owner == "" {
		for _, e := range selecting {
			e.conflict(gr, obj.GetName(), controlv1alpha1.ConflictAssignedByOther, "kcp.io/assigned-locations was written by someone else (no "+OwnerAnnotation+" annotation); it is left alone")
		}
		return nil
	}
	w := selecting[0]
	for _, other := range selecting[1:] {
		other.conflict(gr, obj.GetName(), controlv1alpha1.ConflictOlderPlacement, fmt.Sprintf("the older Placement %s places it", w.pl.Name))
		w.conflict(gr, obj.GetName(), controlv1alpha1.ConflictYoungerPlacement, fmt.Sprintf("the younger Placement %s selects it too", other.pl.Name))
	}
	m := &member{gvr: r.gvr, gvk: r.gvk, obj: obj}
	if hasAssignment {
		m.current, _ = contract.ParseLocations(assigned)
	}
	if w.policy.Divide {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			// Cannot happen: reconcile watches the whole objects of a divided resource.
			return nil
		}
		replicas, found, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
		if !found || err != nil {
			w.conflict(gr, obj.GetName(), controlv1alpha1.ConflictNotDivisible, "replicas: Divide and the object has no integer spec.replicas; it is left alone")
			return nil
		}
		m.replicas = replicas
	}
	w.members = append(w.members, m)
	return nil
}

// place decides where e's members go and returns the writes that make them carry it. With
// spreadBy: Object each member is ranked alone (placement.ObjectKey); otherwise the members
// are one group, ranked once (placement.GroupKey) over the union of their current locations,
// and each member gets the group's locations (with Divide, its own replicas divided over
// them). A member kept as it is counts as placed at once, a written one when its write
// succeeds (write.record), and one whose last write the informer has not delivered yet
// (pending) as written.
func (e *entry) place(cluster, namespace string, pending *pending.Writes) []*write {
	if len(e.members) == 0 || !e.live || e.policy == nil {
		return nil
	}
	var writes []*write
	if e.policy.SpreadByObject {
		pools := map[schema.GroupResource]placement.Pool{}
		for _, m := range e.members {
			gr := m.gvr.GroupResource()
			pool, ok := pools[gr]
			if !ok {
				pool = e.compatiblePool(sets.New(gr.String()))
				pools[gr] = pool
			}
			key := placement.ObjectKey(gr, cluster, namespace, m.obj.GetName())
			if w := e.decided(m, key, e.policy.Decide(key, m.current, m.replicas, pool), pending); w != nil {
				writes = append(writes, w)
			}
		}
		return writes
	}
	key := placement.GroupKey(cluster, namespace)
	current, resources := sets.New[string](), sets.New[string]()
	for _, m := range e.members {
		current.Insert(m.current...)
		resources.Insert(m.gvr.GroupResource().String())
	}
	// A group is an application: a location takes it only when it serves all of it.
	pool := e.compatiblePool(resources)
	choice := e.policy.Choose(key, sets.List(current), pool)
	for _, m := range e.members {
		if w := e.decided(m, key, e.policy.Split(choice, m.replicas, pool), pending); w != nil {
			writes = append(writes, w)
		}
	}
	return writes
}

// decided returns the write that makes member m of the group group carry d, or nil when it
// already does, its last write has not come back yet (pending), or nothing may be written.
func (e *entry) decided(m *member, group string, d placement.Decision, pending *pending.Writes) *write {
	gr := m.gvr.GroupResource()
	e.stuck.Insert(d.Stuck...)
	if d.Keep {
		if len(m.current) > 0 {
			e.placedOn(gr, group, m.current)
		}
		return nil
	}
	if len(d.Locations) == 0 {
		// No location may take a new object (an assigned one gets Keep): nothing to write.
		return nil
	}
	want := desiredAnnotations(e.pl.Name, d, e.policy.Divide)
	if upToDate(m.obj, want) || pending.Stale(m.obj) {
		e.placedOn(gr, group, d.Locations)
		return nil
	}
	return &write{gvr: m.gvr, gvk: m.gvk, obj: m.obj, annotations: want, placer: e, group: group, decision: d}
}
