package view

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdtable "k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metatable "k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
)

// tableConvertor renders view objects as a Table for kubectl, with the columns the source's
// kube-apiserver prints for the same objects.
//
// A built-in kind is printed by kube-apiserver's own code (see builtinTable). A custom resource
// gets the columns its CustomResourceDefinition declares (additionalPrinterColumns, read from
// the source and rendered by apiextensions-apiserver's own table convertor). Any other resource
// (an aggregated API's) gets NAME and AGE: its columns live in its own server, and asking the
// source for a Table row per object would cost a source request per row.
type tableConvertor struct {
	builtin *builtinTable // nil: not a built-in kind
	crd     *crdColumns   // nil: NAME and AGE only
}

// newTableConvertor returns the convertor of the view resource gvr, whose kind is kind; source
// is where the CustomResourceDefinition of a non-built-in resource is read.
func newTableConvertor(source Source, gvr schema.GroupVersionResource, kind string) tableConvertor {
	if b := newBuiltinTable(gvr, kind); b != nil {
		return tableConvertor{builtin: b}
	}
	return tableConvertor{crd: &crdColumns{source: source, gvr: gvr}}
}

var defaultTableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
}

// ConvertToTable turns one object or a view List into a Table with one row per object; the
// list's resourceVersion and continue token are carried over so kubectl can page and watch.
func (c tableConvertor) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	if c.builtin != nil {
		return c.builtin.ConvertToTable(ctx, obj, opts)
	}
	obj, err := unwrap(obj)
	if err != nil {
		return nil, err
	}
	if c.crd != nil {
		if conv := c.crd.convertor(ctx); conv != nil {
			return conv.ConvertToTable(ctx, obj, opts)
		}
	}
	table := &metav1.Table{}
	if o, ok := opts.(*metav1.TableOptions); !ok || !o.NoHeaders {
		table.ColumnDefinitions = defaultTableColumns
	}
	rows, err := metatable.MetaToTableRow(obj, func(_ runtime.Object, _ metav1.Object, name, age string) ([]interface{}, error) {
		return []interface{}{name, age}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot render table: %w", err)
	}
	table.Rows = rows
	if l, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = l.GetResourceVersion()
		table.Continue = l.GetContinue()
		table.RemainingItemCount = l.GetRemainingItemCount()
	} else if m, err := meta.Accessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table, nil
}

// unwrap turns cache objects and view lists into the unstructured objects the table
// convertors evaluate their columns on. The items are shared, read-only. The error is an
// internal error (HTTP 500) naming an object whose content does not decode (contentOf).
func unwrap(obj runtime.Object) (runtime.Object, error) {
	switch o := obj.(type) {
	case *List:
		list := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": o.APIVersion, "kind": o.Kind}}
		list.SetResourceVersion(o.ResourceVersion)
		list.SetContinue(o.Continue)
		list.SetRemainingItemCount(o.RemainingItemCount)
		list.Items = make([]unstructured.Unstructured, 0, len(o.Items))
		for _, item := range o.Items {
			u, err := contentOf(item)
			if err != nil {
				return nil, err
			}
			list.Items = append(list.Items, *u)
		}
		return list, nil
	case runtime.Unstructured:
		if o.IsList() {
			return obj, nil
		}
	}
	return contentOf(obj)
}

// contentOf returns the decoded content of one view object: a cache.Object, a cache.Object as
// its encoders see it (the watch handler's as=Table conversion), what a cache.Object's
// GetObject returns (the apiserver's conversions), or an unstructured object. An object whose
// content does not decode (cache.Object.Content, a defect of the cache) is an internal error
// (HTTP 500) that names it, never an empty row.
func contentOf(obj runtime.Object) (*unstructured.Unstructured, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o, nil
	case *cache.DecodeFailure:
		return nil, apierrors.NewInternalError(o)
	case interface {
		Content() (*unstructured.Unstructured, error)
	}:
		u, err := o.Content()
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		return u, nil
	case runtime.Unstructured:
		return &unstructured.Unstructured{Object: o.UnstructuredContent()}, nil
	}
	return nil, fmt.Errorf("cannot print %T as a table", obj)
}

// crdGVR is the source's CustomResourceDefinitions.
var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdColumnsTTL is how long the printer columns read from a CRD are used before being read again.
const crdColumnsTTL = 30 * time.Second

// crdColumns reads the printer columns of one resource's CustomResourceDefinition from the
// source when a Table is asked for, at most once per crdColumnsTTL. A resource without a CRD
// (built-in or aggregated) is remembered as such for the same time.
type crdColumns struct {
	source  Source
	gvr     schema.GroupVersionResource
	mu      sync.Mutex
	conv    rest.TableConvertor
	fetched time.Time
}

// convertor returns the CRD's table convertor, or nil when the resource has no CRD or it
// cannot be read (the default columns are used then).
func (c *crdColumns) convertor(ctx context.Context) rest.TableConvertor {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fetched.IsZero() && time.Since(c.fetched) < crdColumnsTTL {
		return c.conv
	}
	u, err := c.source.Resource(crdGVR, "").Get(ctx, c.gvr.GroupResource().String(), metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			c.conv, c.fetched = nil, time.Now()
		}
		return c.conv
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
		return c.conv
	}
	var columns []apiextensionsv1.CustomResourceColumnDefinition
	for _, v := range crd.Spec.Versions {
		if v.Name == c.gvr.Version {
			columns = v.AdditionalPrinterColumns
		}
	}
	if len(columns) == 0 {
		// What apiextensions-apiserver prints for a CRD without printer columns.
		columns = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}}
	}
	conv, err := crdtable.New(columns)
	if err != nil {
		return c.conv
	}
	c.conv, c.fetched = conv, time.Now()
	return conv
}
