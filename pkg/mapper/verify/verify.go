// Package verify compares a location view with a target cluster and reports, per invariant of
// docs/design.md, every violation it finds. It is the engine of `mapper verify`; it reads both sides
// and writes nothing (content is checked with server-side dry-run applies).
package verify

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
)

// Config says what to compare. It uses the mapper's own rules (mapper.Mapped,
// mapper.Transform, the namespace mapping, field ownership), so it must match the flags the
// mapper runs with.
type Config struct {
	// Location is the location of the view.
	Location string
	// View and Target are the client configs of the location view (of the whole location)
	// and the target cluster.
	View, Target *rest.Config
	// Part, when not the whole location, restricts the comparison to a mapper's part (a
	// shard): the view is read at the part's path, and only the target copies whose source is
	// in the part are checked (the other shards' copies share the target).
	Part contract.ViewPart
	// Resources restricts the comparison ("configmaps", "deployments.apps"); empty compares
	// every resource the view serves with list and watch.
	Resources []schema.GroupResource
	// NamespaceMapping, ClusterName and FieldManager are the mapper's settings.
	NamespaceMapping mapper.NamespaceMapping
	ClusterName      string
	FieldManager     string
	// SkipContent skips the content check of invariant 1 (one dry-run apply per object):
	// then only existence and marking are checked.
	SkipContent bool
}

// Run compares the view and the target and returns the report. It returns an error when
// either side cannot be read completely (then nothing can be said about the invariants), or
// when NamespaceMappingAuto cannot be resolved (mapper.ResolveNamespaceMapping).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.NamespaceMapping == "" {
		cfg.NamespaceMapping = mapper.NamespaceMappingAuto
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = mapper.DefaultClusterName
	}
	if cfg.FieldManager == "" {
		cfg.FieldManager = mapper.DefaultFieldManager
	}
	partView := mapper.PartConfig(cfg.View, cfg.Part)
	view, err := dynamic.NewForConfig(partView)
	if err != nil {
		return nil, err
	}
	viewDiscovery, err := discovery.NewDiscoveryClientForConfig(partView)
	if err != nil {
		return nil, err
	}
	target, err := dynamic.NewForConfig(cfg.Target)
	if err != nil {
		return nil, err
	}
	targetDiscovery, err := discovery.NewDiscoveryClientForConfig(cfg.Target)
	if err != nil {
		return nil, err
	}
	resources, _, err := mapper.ViewResources(viewDiscovery, cfg.Resources)
	if err != nil {
		return nil, fmt.Errorf("reading the view's discovery: %w", err)
	}
	// The ResourceMappings of the view decide where each resource's copies are (the mapper's
	// rule, mapper.Projections).
	projections, err := mapper.ListProjections(ctx, view)
	if err != nil {
		return nil, err
	}
	mapper.FitResources(resources, projections)
	gvrs := make([]schema.GroupVersionResource, 0, len(resources))
	for gvr := range resources {
		gvrs = append(gvrs, gvr)
	}
	sort.Slice(gvrs, func(i, j int) bool { return gvrs[i].String() < gvrs[j].String() })
	targets := make([]schema.GroupVersionResource, 0, len(gvrs))
	for _, gvr := range gvrs {
		targets = append(targets, projections[gvr.GroupResource()].TargetResource(gvr))
	}
	served := mapper.TargetServes(targetDiscovery, targets)

	report := &Report{Location: cfg.Location, Resources: []string{}}
	clusterViews, err := mapper.NewClusterViews(cfg.View, cfg.Part.Shard)
	if err != nil {
		return nil, err
	}
	c := &checker{cfg: cfg, view: view, clusterView: clusterViews.For, target: target, report: report, clusters: map[string]*ClusterReport{}}
	// Both sides of every resource first: auto mapping is resolved over all of them, as the
	// mapper resolves it over all its informers.
	lists := make([]*resourceLists, 0, len(gvrs))
	for _, gvr := range gvrs {
		p := projections[gvr.GroupResource()]
		l, err := c.list(ctx, gvr, p, resources[gvr], served[p.TargetResource(gvr)] && p.Blocked == "")
		if err != nil {
			return nil, err
		}
		lists = append(lists, l)
	}
	if err := c.resolveMapping(lists); err != nil {
		return nil, err
	}
	for _, l := range lists {
		report.Resources = append(report.Resources, l.gvr.GroupResource().String())
		if err := c.resource(ctx, l); err != nil {
			return nil, err
		}
	}
	report.finish(c.clusters)
	return report, nil
}

// checker compares one resource at a time.
type checker struct {
	cfg  Config
	view dynamic.Interface
	// clusterView returns the client of the view's path of one logical cluster.
	clusterView func(cluster string) (dynamic.Interface, error)
	target      dynamic.Interface
	report      *Report
	// clusters collects the per-cluster counts, by cluster name.
	clusters map[string]*ClusterReport
}

// resourceLists are both sides of one resource: the view's objects and the target's managed
// objects (none when the target does not serve the resource).
type resourceLists struct {
	gvr schema.GroupVersionResource
	// projection is how the copies are written (a ResourceMapping's, or the zero Projection).
	projection         mapper.Projection
	namespaced, served bool
	view, managed      []*unstructured.Unstructured
}

// list reads both sides of gvr, whose copies are written as p says.
func (c *checker) list(ctx context.Context, gvr schema.GroupVersionResource, p mapper.Projection, namespaced, served bool) (*resourceLists, error) {
	name := gvr.GroupResource().String()
	l := &resourceLists{gvr: gvr, projection: p, namespaced: namespaced, served: served}
	var err error
	if l.view, err = listAll(ctx, c.view.Resource(gvr), metav1.ListOptions{}); err != nil {
		return nil, fmt.Errorf("listing %s through the view: %w", name, err)
	}
	if served {
		if l.managed, err = listAll(ctx, c.target.Resource(p.TargetResource(gvr)), metav1.ListOptions{LabelSelector: contract.LocationLabel + "=" + c.cfg.Location}); err != nil {
			return nil, fmt.Errorf("listing managed %s on the target: %w", name, err)
		}
		if part := c.cfg.Part; !part.Whole() {
			// Another shard's copies (and unmarked ones, which no shard owns) are not this
			// part's to judge.
			l.managed = slices.DeleteFunc(l.managed, func(item *unstructured.Unstructured) bool {
				ref, _, ok := mapper.MarkedSource(item, c.cfg.Location, namespaced)
				return !ok || !part.Contains(ref.Cluster, ref.Namespace)
			})
		}
	}
	return l, nil
}

// resolveMapping puts the namespace mapping in force into c.cfg and the report: the configured
// one, or for NamespaceMappingAuto the one mapper.ResolveNamespaceMapping gives for these
// lists (the mapper's rule). An empty view and target resolve to NamespaceMappingSame (there
// is nothing to place).
func (c *checker) resolveMapping(lists []*resourceLists) error {
	if c.cfg.NamespaceMapping != mapper.NamespaceMappingAuto {
		c.report.NamespaceMapping = string(c.cfg.NamespaceMapping)
		c.report.NamespaceMappingReason = "set explicitly"
		return nil
	}
	var evidence mapper.PlacementEvidence
	clusters := sets.New[string]()
	objects := 0
	for _, l := range lists {
		for _, obj := range l.view {
			clusters.Insert(mapper.SourceOf(obj, c.cfg.ClusterName).Cluster)
			objects++
		}
		if !l.namespaced {
			continue
		}
		for _, item := range l.managed {
			if ref, _, ok := mapper.MarkedSource(item, c.cfg.Location, true); ok {
				evidence.Observe(item.GetNamespace(), item.GetName(), ref)
			}
		}
	}
	mapping, why, decided, err := mapper.ResolveNamespaceMapping(evidence, sets.List(clusters), objects)
	if err != nil {
		return err
	}
	if !decided {
		mapping, why = mapper.NamespaceMappingSame, "nothing to place: the view is empty and the target holds no copies"
	}
	c.cfg.NamespaceMapping = mapping
	c.report.NamespaceMapping = string(mapping)
	c.report.NamespaceMappingReason = "auto: " + why
	return nil
}

// cluster returns the per-cluster counts of cluster, creating them.
func (c *checker) cluster(name string) *ClusterReport {
	cr := c.clusters[name]
	if cr == nil {
		cr = &ClusterReport{Name: name}
		c.clusters[name] = cr
	}
	return cr
}

// add records a violation, counted for its cluster when it names one.
func (c *checker) add(v Violation) {
	if v.Cluster != "" {
		c.cluster(v.Cluster).Violations++
	}
	c.report.add(v)
}

// listAll lists every object of client with the given options, page by page.
func listAll(ctx context.Context, client dynamic.ResourceInterface, opts metav1.ListOptions) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	p := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return client.List(ctx, o) })
	err := p.EachListItemWithAlloc(ctx, opts, func(obj runtime.Object) error {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
		return nil
	})
	return out, err
}

func objectKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// resource checks one resource: every view object against its target copy (invariants 1–3),
// then every managed target object against the view (invariants 2 and 4).
func (c *checker) resource(ctx context.Context, l *resourceLists) error {
	gvr, namespaced := l.gvr, l.namespaced
	name := gvr.GroupResource().String()
	managed := map[string]*unstructured.Unstructured{}
	for _, item := range l.managed {
		managed[objectKey(item.GetNamespace(), item.GetName())] = item
	}
	c.report.ManagedObjects += len(l.managed)

	c.identities(name, l.view)
	// Where each mapped view object belongs on the target.
	expected := map[string]mapper.SourceRef{}
	for _, obj := range l.view {
		if !mapper.Mapped(obj) {
			continue
		}
		c.report.ViewObjects++
		src := mapper.SourceOf(obj, c.cfg.ClusterName)
		cr := c.cluster(src.Cluster)
		cr.Assigned++
		before := len(c.report.Violations)
		if err := c.object(ctx, l, obj, src, managed, expected); err != nil {
			return err
		}
		if len(c.report.Violations) == before {
			cr.InSync++
		}
	}

	for tkey, live := range managed {
		ref, _, ok := mapper.MarkedSource(live, c.cfg.Location, namespaced)
		if !ok {
			c.add(Violation{Invariant: 2, Resource: name, Target: tkey,
				Message: "carries " + contract.LocationLabel + "=" + c.cfg.Location + " but not the source annotations"})
			continue
		}
		place, err := c.place(ctx, l, ref)
		if err != nil {
			c.add(Violation{Invariant: 2, Resource: name, Cluster: ref.Cluster, Source: ref.String(), Target: tkey,
				Message: "the copy names a source its ResourceMapping's naming cannot place: " + err.Error()})
			continue
		}
		if place != tkey {
			c.add(Violation{Invariant: 2, Resource: name, Cluster: ref.Cluster, Source: ref.String(), Target: tkey,
				Message: "the copy names a source whose place on the target is " + place + ", not here"})
			continue
		}
		if src, ok := expected[tkey]; ok && src == ref {
			continue
		}
		orphan := Violation{Invariant: 4, Resource: name, Cluster: ref.Cluster, Source: ref.String(), Target: tkey,
			Message: "no object of the view belongs here (orphan)"}
		if _, taken := expected[tkey]; !taken {
			// At its source's place, which no object of the view claims: an orphan only when
			// the view confirms that its source is gone, as the mapper deletes a copy only
			// then (mapper.GoneFromView). A view that withholds the source (503) or has not
			// synced its resource (429) keeps it, rightly.
			gone, err := c.goneFromView(ctx, gvr, ref)
			if err != nil {
				c.report.Kept = append(c.report.Kept, Kept{Resource: name, Cluster: ref.Cluster, Source: ref.String(), Target: tkey,
					Message: "not listed by the view, which does not confirm that its source is gone: " + err.Error()})
				continue
			}
			if !gone {
				continue // the view holds it now (it was created or assigned after the list)
			}
		}
		c.add(orphan)
	}
	return nil
}

// identities reports, under invariant 2, the view objects of resource name whose identity
// cannot be their source's: an object without a uid (every source object has one), and
// several objects under one identity (logical cluster, namespace, name), which a source never
// holds. Either means a rendering changed an object's identity (docs/customization.md, "What a
// rendering may not change"), so a copy made from it would not be its source's.
func (c *checker) identities(name string, view []*unstructured.Unstructured) {
	count := map[mapper.SourceRef]int{}
	for _, obj := range view {
		if !mapper.Mapped(obj) {
			continue
		}
		src := mapper.SourceOf(obj, c.cfg.ClusterName)
		count[src]++
		if obj.GetUID() == "" {
			c.add(Violation{Invariant: 2, Resource: name, Cluster: src.Cluster, Source: src.String(),
				Message: "the view shows the object without a uid: its identity is not a source object's"})
		}
	}
	for src, n := range count {
		if n > 1 {
			c.add(Violation{Invariant: 2, Resource: name, Cluster: src.Cluster, Source: src.String(),
				Message: fmt.Sprintf("the view shows %d objects under this identity: all but one took it from another object", n)})
		}
	}
}

// place returns where on the target the copy of source ref belongs: "namespace/name", or
// "name" for a cluster-scoped resource (targetPlace).
func (c *checker) place(ctx context.Context, l *resourceLists, ref mapper.SourceRef) (string, error) {
	ns, name, err := c.targetPlace(ctx, l, ref)
	return objectKey(ns, name), err
}

// targetPlace returns the target namespace ("" for a cluster-scoped resource) and name of
// the copy of source ref: the namespace mapping in force and the source name, or as the
// resource's ResourceMapping names them (mapper.Naming.Place, as the mapper places them). It
// fails when the naming cannot be evaluated for ref.
func (c *checker) targetPlace(ctx context.Context, l *resourceLists, ref mapper.SourceRef) (string, string, error) {
	ns := ""
	if l.namespaced {
		ns = c.cfg.NamespaceMapping.TargetNamespace(ref.Cluster, ref.Namespace)
	}
	return l.projection.Naming.Place(ctx, c.cfg.Location, ref, ns)
}

// goneFromView reports whether src is not in the view, read through the view's path of its
// logical cluster (mapper.GoneFromView); an error when the view does not say.
func (c *checker) goneFromView(ctx context.Context, gvr schema.GroupVersionResource, src mapper.SourceRef) (bool, error) {
	view, err := c.clusterView(src.Cluster)
	if err != nil {
		return false, err
	}
	return mapper.GoneFromView(ctx, view, gvr, src, c.cfg.ClusterName)
}

// object checks one mapped view object obj (source src) against its target copy (invariants
// 1 and 3) and records its target place in expected. When two sources share a place (two
// logical clusters under NamespaceMappingSame), the one whose copy is there owns it and the
// other is a conflict under invariant 1.
func (c *checker) object(ctx context.Context, l *resourceLists, obj *unstructured.Unstructured,
	src mapper.SourceRef, managed map[string]*unstructured.Unstructured, expected map[string]mapper.SourceRef) error {
	namespaced, served := l.namespaced, l.served
	name := l.gvr.GroupResource().String()
	gvr := l.projection.TargetResource(l.gvr) // the target resource of the copies
	ns, tname, err := c.targetPlace(ctx, l, src)
	if err != nil {
		c.add(Violation{Invariant: 1, Resource: name, Cluster: src.Cluster, Source: src.String(),
			Message: "its ResourceMapping's naming cannot place the copy: " + err.Error()})
		return nil
	}
	tkey := objectKey(ns, tname)
	v := Violation{Invariant: 1, Resource: name, Cluster: src.Cluster, Source: src.String(), Target: tkey}
	if !served {
		expected[tkey] = src
		v.Message = "the target does not serve " + gvr.GroupVersion().String() + " " + gvr.Resource + " (the resource is halted)"
		c.add(v)
		return nil
	}
	live := managed[tkey]
	if live == nil {
		expected[tkey] = src
		_, err := c.target.Resource(gvr).Namespace(ns).Get(ctx, tname, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && !c.cfg.SkipContent:
			v.Message = "missing on the target"
			if msg, err := c.outOfDate(ctx, l, obj, nil, ns, tname, src); err != nil {
				return err
			} else if msg != "" {
				v.Message += "; " + msg
			}
		case apierrors.IsNotFound(err):
			v.Message = "missing on the target"
		case err != nil:
			return fmt.Errorf("reading %s %s on the target: %w", name, tkey, err)
		default:
			v.Message = "the target holds an object of that name that the mapper does not manage (conflict)"
		}
		c.add(v)
		return nil
	}
	ref, uid, ok := mapper.MarkedSource(live, c.cfg.Location, namespaced)
	if !ok {
		return nil // reported under invariant 2
	}
	if ref != src {
		if _, taken := expected[tkey]; !taken {
			expected[tkey] = src
		}
		v.Message = "the target object of that name is the copy of " + ref.String() + " (conflict)"
		c.add(v)
		return nil
	}
	expected[tkey] = src
	if uid != obj.GetUID() {
		c.add(Violation{Invariant: 2, Resource: name, Cluster: src.Cluster, Source: src.String(), Target: tkey,
			Message: fmt.Sprintf("the copy names source uid %q, the view's object has uid %q: the copy was made from another object under this identity, or its source was re-created since", uid, obj.GetUID())})
	}
	if !c.cfg.SkipContent {
		if msg, err := c.outOfDate(ctx, l, obj, live, ns, tname, src); err != nil {
			return err
		} else if msg != "" {
			v.Message = msg
			c.add(v)
		}
	}
	if mapper.Reflects(obj) {
		// What the mapper writes back (docs/status.md): the copy's status with its
		// observedGeneration counted in view generations, not the copy's raw .status.
		if reported := mapper.ReportedStatus(live, obj); len(reported) > 0 && !equality.Semantic.DeepEqual(obj.Object["status"], reported) {
			c.add(Violation{Invariant: 3, Resource: name, Cluster: src.Cluster, Source: src.String(), Target: tkey,
				Message: "the view's status differs from the status the target's copy reports"})
		}
	}
	return nil
}

// outOfDate dry-runs the apply the mapper would make and returns a message naming the fields
// where the result differs from the live copy, or "" when the copy is up to date. live is nil
// for a missing copy: then only a failing apply gives a message.
func (c *checker) outOfDate(ctx context.Context, l *resourceLists, obj, live *unstructured.Unstructured, ns, name string, src mapper.SourceRef) (string, error) {
	gvr := l.projection.TargetResource(l.gvr)
	desired := mapper.Transform(obj, mapper.TargetObject{Location: c.cfg.Location, Namespace: ns, Name: name, Source: src, Kind: l.projection.TargetKind()})
	if live != nil {
		if foreign, err := mapper.ForeignFields(live, c.cfg.FieldManager); err == nil {
			mapper.DropFields(desired, foreign)
		}
	}
	result, err := c.target.Resource(gvr).Namespace(ns).Apply(ctx, name, desired, metav1.ApplyOptions{
		FieldManager: c.cfg.FieldManager, DryRun: []string{metav1.DryRunAll},
	})
	switch {
	case err != nil && (apierrors.IsConflict(err) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)):
		return "the mapper's apply would fail: " + err.Error(), nil
	case live == nil && apierrors.IsNotFound(err):
		return "", nil // the target namespace does not exist yet; the mapper creates it
	case err != nil:
		return "", fmt.Errorf("dry-run apply of %s %s: %w", gvr.GroupResource().String(), objectKey(ns, name), err)
	case live == nil:
		return "", nil
	}
	if diff := differingFields(live, result); len(diff) > 0 {
		return fmt.Sprintf("out of date: the mapper's apply would change %v", diff), nil
	}
	return "", nil
}

// differingFields compares two versions of an object, ignoring the bookkeeping an apply
// always touches (managedFields, resourceVersion), and returns the top-level fields (and
// metadata fields as "metadata.<field>") that differ.
func differingFields(a, b *unstructured.Unstructured) []string {
	var out []string
	keys := map[string]bool{}
	for k := range a.Object {
		keys[k] = true
	}
	for k := range b.Object {
		keys[k] = true
	}
	for k := range keys {
		if k != "metadata" {
			if !equality.Semantic.DeepEqual(a.Object[k], b.Object[k]) {
				out = append(out, k)
			}
			continue
		}
		am, _ := a.Object["metadata"].(map[string]interface{})
		bm, _ := b.Object["metadata"].(map[string]interface{})
		mkeys := map[string]bool{}
		for mk := range am {
			mkeys[mk] = true
		}
		for mk := range bm {
			mkeys[mk] = true
		}
		for mk := range mkeys {
			if mk == "managedFields" || mk == "resourceVersion" {
				continue
			}
			if !equality.Semantic.DeepEqual(am[mk], bm[mk]) {
				out = append(out, "metadata."+mk)
			}
		}
	}
	sort.Strings(out)
	return out
}
