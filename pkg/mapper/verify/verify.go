// Package verify compares a location view with a target cluster and reports, per invariant of
// DESIGN.md, every violation it finds. It is the engine of `mapper verify`; it reads both sides
// and writes nothing (content is checked with server-side dry-run applies).
package verify

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	// View and Target are the client configs of the location view and the target cluster.
	View, Target *rest.Config
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
// either side cannot be read completely (then nothing can be said about the invariants).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.NamespaceMapping == "" {
		cfg.NamespaceMapping = mapper.NamespaceMappingSame
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = mapper.DefaultClusterName
	}
	if cfg.FieldManager == "" {
		cfg.FieldManager = mapper.DefaultFieldManager
	}
	view, err := dynamic.NewForConfig(cfg.View)
	if err != nil {
		return nil, err
	}
	viewDiscovery, err := discovery.NewDiscoveryClientForConfig(cfg.View)
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
	gvrs := make([]schema.GroupVersionResource, 0, len(resources))
	for gvr := range resources {
		gvrs = append(gvrs, gvr)
	}
	sort.Slice(gvrs, func(i, j int) bool { return gvrs[i].String() < gvrs[j].String() })
	served := mapper.TargetServes(targetDiscovery, gvrs)

	report := &Report{Location: cfg.Location, Resources: []string{}}
	c := &checker{cfg: cfg, view: view, target: target, report: report}
	for _, gvr := range gvrs {
		report.Resources = append(report.Resources, gvr.GroupResource().String())
		if err := c.resource(ctx, gvr, resources[gvr], served[gvr]); err != nil {
			return nil, err
		}
	}
	report.finish()
	return report, nil
}

// checker compares one resource at a time.
type checker struct {
	cfg    Config
	view   dynamic.Interface
	target dynamic.Interface
	report *Report
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
func (c *checker) resource(ctx context.Context, gvr schema.GroupVersionResource, namespaced, served bool) error {
	name := gvr.GroupResource().String()
	viewItems, err := listAll(ctx, c.view.Resource(gvr), metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing %s through the view: %w", name, err)
	}
	managed := map[string]*unstructured.Unstructured{}
	if served {
		items, err := listAll(ctx, c.target.Resource(gvr), metav1.ListOptions{LabelSelector: contract.LocationLabel + "=" + c.cfg.Location})
		if err != nil {
			return fmt.Errorf("listing managed %s on the target: %w", name, err)
		}
		for _, item := range items {
			managed[objectKey(item.GetNamespace(), item.GetName())] = item
		}
		c.report.ManagedObjects += len(items)
	}

	// Where each mapped view object belongs on the target.
	expected := map[string]mapper.SourceRef{}
	for _, obj := range viewItems {
		if !mapper.Mapped(obj) {
			continue
		}
		c.report.ViewObjects++
		src := mapper.SourceOf(obj, c.cfg.ClusterName)
		ns := ""
		if namespaced {
			ns = c.cfg.NamespaceMapping.TargetNamespace(src.Cluster, src.Namespace)
		}
		tkey := objectKey(ns, obj.GetName())
		expected[tkey] = src
		v := Violation{Invariant: 1, Resource: name, Source: src.String(), Target: tkey}
		if !served {
			v.Message = "the target does not serve " + gvr.GroupVersion().String() + " " + gvr.Resource + " (the resource is halted)"
			c.report.add(v)
			continue
		}
		live := managed[tkey]
		if live == nil {
			_, err := c.target.Resource(gvr).Namespace(ns).Get(ctx, obj.GetName(), metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err) && !c.cfg.SkipContent:
				v.Message = "missing on the target"
				if msg, err := c.outOfDate(ctx, gvr, obj, nil, ns, src); err != nil {
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
			c.report.add(v)
			continue
		}
		ref, _, ok := mapper.MarkedSource(live, c.cfg.Location, namespaced)
		if !ok {
			continue // reported under invariant 2 below
		}
		if ref != src {
			v.Message = "the target object of that name is the copy of " + ref.String()
			c.report.add(v)
			continue
		}
		if !c.cfg.SkipContent {
			if msg, err := c.outOfDate(ctx, gvr, obj, live, ns, src); err != nil {
				return err
			} else if msg != "" {
				v.Message = msg
				c.report.add(v)
			}
		}
		if mapper.Reflects(obj) {
			status, _ := live.Object["status"].(map[string]interface{})
			if len(status) > 0 && !equality.Semantic.DeepEqual(obj.Object["status"], live.Object["status"]) {
				c.report.add(Violation{Invariant: 3, Resource: name, Source: src.String(), Target: tkey,
					Message: "the source's status differs from the target's"})
			}
		}
	}

	for tkey, live := range managed {
		ref, _, ok := mapper.MarkedSource(live, c.cfg.Location, namespaced)
		if !ok {
			c.report.add(Violation{Invariant: 2, Resource: name, Target: tkey,
				Message: "carries " + contract.LocationLabel + "=" + c.cfg.Location + " but not the source annotations"})
			continue
		}
		if src, ok := expected[tkey]; !ok || src != ref {
			c.report.add(Violation{Invariant: 4, Resource: name, Source: ref.String(), Target: tkey,
				Message: "no object of the view belongs here (orphan)"})
		}
	}
	return nil
}

// outOfDate dry-runs the apply the mapper would make and returns a message naming the fields
// where the result differs from the live copy, or "" when the copy is up to date. live is nil
// for a missing copy: then only a failing apply gives a message.
func (c *checker) outOfDate(ctx context.Context, gvr schema.GroupVersionResource, obj, live *unstructured.Unstructured, ns string, src mapper.SourceRef) (string, error) {
	desired := mapper.Transform(obj, mapper.TargetObject{Location: c.cfg.Location, Namespace: ns, Source: src})
	if live != nil {
		if foreign, err := mapper.ForeignFields(live, c.cfg.FieldManager); err == nil {
			mapper.DropFields(desired, foreign)
		}
	}
	result, err := c.target.Resource(gvr).Namespace(ns).Apply(ctx, obj.GetName(), desired, metav1.ApplyOptions{
		FieldManager: c.cfg.FieldManager, DryRun: []string{metav1.DryRunAll},
	})
	switch {
	case err != nil && (apierrors.IsConflict(err) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)):
		return "the mapper's apply would fail: " + err.Error(), nil
	case live == nil && apierrors.IsNotFound(err):
		return "", nil // the target namespace does not exist yet; the mapper creates it
	case err != nil:
		return "", fmt.Errorf("dry-run apply of %s %s: %w", gvr.GroupResource().String(), objectKey(ns, obj.GetName()), err)
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
