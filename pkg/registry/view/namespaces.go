package view

import (
	"context"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// namespaceStorage serves a view's /api/v1/namespaces: one Namespace per namespace that holds
// at least one object of the location, across all mirrored resources. The entries are made by
// the view (only name and phase), not copies of the source's Namespace objects, which a
// location is not assigned to as such. On a part's path (clusters, a hash shard) only the
// namespaces of that part count. Get and list only; no watch.
type namespaceStorage struct {
	tableConvertor
	objects Objects
}

// New returns an empty Namespace.
func (s *namespaceStorage) New() runtime.Object { return namespaceObject("") }

// NewList returns an empty NamespaceList.
func (s *namespaceStorage) NewList() runtime.Object {
	return &List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NamespaceList"}}
}

// Destroy releases nothing.
func (s *namespaceStorage) Destroy() {}

// Get returns the namespace if it holds objects of the location, else 404.
func (s *namespaceStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	if _, ok := s.namespaces(ctx)[name]; !ok {
		return nil, apierrors.NewNotFound(namespacesGVR.GroupResource(), name)
	}
	return namespaceObject(name), nil
}

// List returns the location's namespaces that match the field selector (metadata.name) and,
// trivially, the label selector (view namespaces carry no labels), sorted by name.
func (s *namespaceStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	list := s.NewList().(*List)
	label, field := opts.LabelSelector, opts.FieldSelector
	if label == nil {
		label = labels.Everything()
	}
	if field == nil {
		field = fields.Everything()
	}
	names := make([]string, 0)
	for ns := range s.namespaces(ctx) {
		if label.Matches(labels.Set{}) && field.Matches(fields.Set{"metadata.name": ns}) {
			names = append(names, ns)
		}
	}
	sort.Strings(names)
	for _, ns := range names {
		list.Items = append(list.Items, namespaceObject(ns))
	}
	return list, nil
}

// namespaces collects the location's namespaces over every mirrored resource (of the request's
// part of the location on a part's path).
func (s *namespaceStorage) namespaces(ctx context.Context) map[string]struct{} {
	location, _ := LocationFrom(ctx)
	out := map[string]struct{}{}
	for _, r := range s.objects.Resources() {
		if !r.Namespaced {
			continue
		}
		if store, ok := s.objects.Store(r.GVR); ok {
			for ns := range store.Namespaces(location, PartFrom(ctx)) {
				out[ns] = struct{}{}
			}
		}
	}
	return out
}

func namespaceObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "Namespace",
		"metadata":   map[string]interface{}{"name": name},
		"status":     map[string]interface{}{"phase": "Active"},
	}}
	return u
}
