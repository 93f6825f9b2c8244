package mapper

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// relatedMapping is what the mapper takes from one ResourceMapping of its view for the related
// objects of origin Target (docs/resourcemapping.md, "Related objects: origin Target").
type relatedMapping struct {
	// Name is the mapping's metadata.name (the value of contract.RelatedMappingAnnotation).
	Name string
	// Accepted is the mapping's verdict (Projections): a mapping not in force brings nothing up
	// and deletes nothing.
	Accepted bool
	// Err, when set, says why an entry cannot be used (an expression that does not compile):
	// then nothing of the mapping is written or deleted, until the mapping is fixed.
	Err error
	// Entries are the compiled entries of origin Target.
	Entries []*relatedEntry
}

// relatedEntry is one compiled entry of origin Target.
type relatedEntry struct {
	Identifier string
	// Source is the main resource as the view serves it (spec.source), and CopyResource the
	// resource its copies are written as on the target (the projection).
	Source       schema.GroupVersionResource
	CopyResource schema.GroupVersionResource
	// Resource is the resource of the related objects on the target, and of their copies in
	// the source.
	Resource schema.GroupVersionResource
	// byName, or selector (label key to value expression), finds the related target objects
	// from the main object's copy.
	byName   *stringProgram
	selector map[string]*stringProgram
	// name returns the related copy's name; nil: relatedDefaultName.
	name *stringProgram
}

// compileRelatedMapping reads the entries of origin Target of mapping u (as the view serves
// it), accepted telling whether the mapping is in force (Projections' verdict). Entries of
// origin Source are not the mapper's (mapper-controller follows them).
func compileRelatedMapping(u *unstructured.Unstructured, accepted bool) *relatedMapping {
	out := &relatedMapping{Name: u.GetName(), Accepted: accepted}
	var rm controlv1alpha1.ResourceMapping
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rm); err != nil {
		out.Err = fmt.Errorf("the mapping cannot be read: %w", err)
		return out
	}
	out.Entries, out.Err = compileRelatedEntries(rm.Spec)
	return out
}

// compileRelatedEntries compiles the entries of origin Target of spec, in order. The error
// names the first entry that does not compile and its field ("spec.related[0] (credentials):
// object.name: ..."); then no entry is returned.
func compileRelatedEntries(spec controlv1alpha1.ResourceMappingSpec) ([]*relatedEntry, error) {
	source := schema.GroupVersionResource{Group: spec.Source.Group, Version: spec.Source.Version, Resource: spec.Source.Resource}
	copyResource := source
	if t := spec.Target; t != nil {
		copyResource = schema.GroupVersionResource{Group: t.Group, Version: t.Version, Resource: t.Resource}
	}
	var entries []*relatedEntry
	for i, r := range spec.Related {
		if r.Origin != controlv1alpha1.RelatedOriginTarget {
			continue
		}
		e, err := compileRelatedEntry(r, source, copyResource)
		if err != nil {
			return nil, fmt.Errorf("spec.related[%d] (%s): %w", i, r.Identifier, err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// compileRelatedEntry compiles the expressions of one entry; the error names the field.
func compileRelatedEntry(spec controlv1alpha1.RelatedResource, source, copyResource schema.GroupVersionResource) (*relatedEntry, error) {
	e := &relatedEntry{
		Identifier: spec.Identifier, Source: source, CopyResource: copyResource,
		Resource: schema.GroupVersionResource{Group: spec.Resource.Group, Version: spec.Resource.Version, Resource: spec.Resource.Resource},
	}
	var err error
	switch {
	case spec.Object.Name != "":
		if e.byName, err = compileString(spec.Object.Name); err != nil {
			return nil, fmt.Errorf("object.name: %w", err)
		}
	case len(spec.Object.LabelSelector) > 0:
		e.selector = make(map[string]*stringProgram, len(spec.Object.LabelSelector))
		for k, expr := range spec.Object.LabelSelector {
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				return nil, fmt.Errorf("object.labelSelector: %q is not a label key: %v", k, msgs)
			}
			if e.selector[k], err = compileString(expr); err != nil {
				return nil, fmt.Errorf("object.labelSelector[%s]: %w", k, err)
			}
		}
	default:
		return nil, fmt.Errorf("object: set name or labelSelector")
	}
	if spec.Name != "" {
		if e.name, err = compileString(spec.Name); err != nil {
			return nil, fmt.Errorf("name: %w", err)
		}
	}
	return e, nil
}

// relatedLister returns the related target objects of resource gvr in namespace ns, and false
// when what the target holds is not known (its informer has not synced).
type relatedLister func(gvr schema.GroupVersionResource, ns string) ([]*unstructured.Unstructured, bool)

// find returns the related target objects of the main object's copy (in the copy's
// namespace), sorted by name, and false when they are not known. It fails when an expression
// fails or returns what cannot be a name or label value.
func (e *relatedEntry) find(ctx context.Context, copy *unstructured.Unstructured, location string, list relatedLister) ([]*unstructured.Unstructured, bool, error) {
	vars := map[string]interface{}{relatedObjectVar: copy.Object, relatedLocationVar: location, relatedIdentifierVar: e.Identifier}
	objs, known := list(e.Resource, copy.GetNamespace())
	if !known {
		return nil, false, nil
	}
	var out []*unstructured.Unstructured
	if e.byName != nil {
		name, err := e.byName.eval(ctx, vars)
		if err != nil {
			return nil, true, fmt.Errorf("object.name: %w", err)
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return nil, true, fmt.Errorf("object.name returned %q, not an object name: %v", name, msgs)
		}
		for _, o := range objs {
			if o.GetName() == name {
				out = append(out, o)
			}
		}
		return out, true, nil
	}
	want := labels.Set{}
	for k, p := range e.selector {
		v, err := p.eval(ctx, vars)
		if err != nil {
			return nil, true, fmt.Errorf("object.labelSelector[%s]: %w", k, err)
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			return nil, true, fmt.Errorf("object.labelSelector[%s] returned %q, not a label value: %v", k, v, msgs)
		}
		want[k] = v
	}
	sel := labels.SelectorFromSet(want)
	for _, o := range objs {
		if sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, true, nil
}

// copyName returns the name of the related copy of target object related, for main source
// object main: the entry's name expression, or relatedDefaultName; either is made a valid name
// by relatedCopyName.
func (e *relatedEntry) copyName(ctx context.Context, main, related *unstructured.Unstructured, location string) (string, error) {
	if e.name == nil {
		return relatedCopyName(main.GetName() + "-" + e.Identifier + "-" + location), nil
	}
	name, err := e.name.eval(ctx, map[string]interface{}{
		relatedObjectVar: main.Object, relatedRelatedVar: related.Object, relatedLocationVar: location, relatedIdentifierVar: e.Identifier,
	})
	if err != nil {
		return "", fmt.Errorf("name: %w", err)
	}
	if name == "" {
		return "", fmt.Errorf("name: %q returned an empty name", e.name.expr)
	}
	return relatedCopyName(name), nil
}
