package view

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/printers"
	printersinternal "k8s.io/kubernetes/pkg/printers/internalversion"
	printerstorage "k8s.io/kubernetes/pkg/printers/storage"

	// The built-in API groups kube-apiserver serves, registered into legacyscheme (external
	// versions, internal types, conversions and defaults) as kube-apiserver registers them.
	_ "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	_ "k8s.io/kubernetes/pkg/apis/apiserverinternal/install"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/autoscaling/install"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	_ "k8s.io/kubernetes/pkg/apis/certificates/install"
	_ "k8s.io/kubernetes/pkg/apis/coordination/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/discovery/install"
	_ "k8s.io/kubernetes/pkg/apis/events/install"
	_ "k8s.io/kubernetes/pkg/apis/flowcontrol/install"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	_ "k8s.io/kubernetes/pkg/apis/node/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	_ "k8s.io/kubernetes/pkg/apis/rbac/install"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	_ "k8s.io/kubernetes/pkg/apis/scheduling/install"
	_ "k8s.io/kubernetes/pkg/apis/storage/install"
	_ "k8s.io/kubernetes/pkg/apis/storagemigration/install"
)

// kubePrinters is kube-apiserver's table generator (printersinternal.AddHandlers, the printers
// every built-in registry of kube-apiserver hands to printerstorage.TableConvertor) and the set
// of internal types it has a printer for. Built once, on the first use.
var kubePrinters = sync.OnceValues(func() (*printers.HumanReadableGenerator, map[reflect.Type]bool) {
	gen := printers.NewTableGenerator()
	rec := &printedTypes{PrintHandler: gen, types: map[reflect.Type]bool{}}
	printersinternal.AddHandlers(rec)
	return gen, rec.types
})

// printedTypes is a printers.PrintHandler that records the object type of every print function
// it forwards, so that a view knows whether kube-apiserver has a printer for a kind.
type printedTypes struct {
	printers.PrintHandler
	types map[reflect.Type]bool
}

// TableHandler records printFunc's object type (its first parameter) and registers it.
func (p *printedTypes) TableHandler(columns []metav1.TableColumnDefinition, printFunc interface{}) error {
	if t := reflect.TypeOf(printFunc); t != nil && t.Kind() == reflect.Func && t.NumIn() > 0 {
		p.types[t.In(0)] = true
	}
	return p.PrintHandler.TableHandler(columns, printFunc)
}

// builtinTable renders a built-in kind (one legacyscheme knows in the source's version) the way
// kube-apiserver does: each view object is converted from the served version to the internal
// type (with kube-apiserver's defaults, as its storage decodes objects) and printed by
// kube-apiserver's own table convertor for the kind: printerstorage.TableConvertor over
// printersinternal.AddHandlers when the kind has a printer, else rest.NewDefaultTableConvertor
// (NAME and CREATED AT), the two convertors kube-apiserver's registries use.
type builtinTable struct {
	external schema.GroupVersionKind
	internal schema.GroupVersionKind
	conv     rest.TableConvertor
}

// newBuiltinTable returns the convertor of gvr (whose kind is kind) when legacyscheme knows the
// kind in that version and has an internal type for it, else nil (a custom resource or an
// aggregated API, rendered by tableConvertor's other paths).
func newBuiltinTable(gvr schema.GroupVersionResource, kind string) *builtinTable {
	external := gvr.GroupVersion().WithKind(kind)
	internal := schema.GroupVersion{Group: gvr.Group, Version: runtime.APIVersionInternal}.WithKind(kind)
	if !legacyscheme.Scheme.Recognizes(external) || !legacyscheme.Scheme.Recognizes(internal) {
		return nil
	}
	obj, err := legacyscheme.Scheme.New(internal)
	if err != nil {
		return nil
	}
	gen, types := kubePrinters()
	b := &builtinTable{external: external, internal: internal}
	if types[reflect.TypeOf(obj)] {
		b.conv = printerstorage.TableConvertor{TableGenerator: gen}
	} else {
		b.conv = rest.NewDefaultTableConvertor(gvr.GroupResource())
	}
	return b
}

// ConvertToTable converts obj (a *cache.Object, an *unstructured.Unstructured or a view *List)
// to the internal type, prints it with kube-apiserver's convertor, and puts the view's own
// objects back into the rows (the request handler renders them for includeObject). An object
// that does not convert is a 500 naming it; a printer that panics is a 500 too.
func (b *builtinTable) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (table *metav1.Table, err error) {
	internal, originals, err := b.toInternal(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	defer func() {
		if r := recover(); r != nil {
			table, err = nil, apierrors.NewInternalError(fmt.Errorf("printing %v: %v", b.external, r))
		}
	}()
	table, err = b.conv.ConvertToTable(ctx, internal, opts)
	if err != nil {
		return nil, err
	}
	for i := range table.Rows {
		if o, ok := originals[table.Rows[i].Object.Object]; ok {
			table.Rows[i].Object.Object = o
		}
	}
	return table, nil
}

// toInternal converts obj to the internal type (a List becomes the internal list kind, with the
// list's resourceVersion and continue token) and maps each internal object to its view object.
func (b *builtinTable) toInternal(obj runtime.Object) (runtime.Object, map[runtime.Object]runtime.Object, error) {
	if l, ok := obj.(*List); ok {
		list, err := legacyscheme.Scheme.New(b.internal.GroupVersion().WithKind(b.internal.Kind + "List"))
		if err != nil {
			return nil, nil, err
		}
		items := make([]runtime.Object, 0, len(l.Items))
		for _, item := range l.Items {
			in, err := b.convert(item)
			if err != nil {
				return nil, nil, err
			}
			items = append(items, in)
		}
		if err := meta.SetList(list, items); err != nil {
			return nil, nil, err
		}
		lm, err := meta.ListAccessor(list)
		if err != nil {
			return nil, nil, err
		}
		lm.SetResourceVersion(l.ResourceVersion)
		lm.SetContinue(l.Continue)
		lm.SetRemainingItemCount(l.RemainingItemCount)
		// SetList copies the items into the list's slice; map those copies.
		copied, err := meta.ExtractList(list)
		if err != nil {
			return nil, nil, err
		}
		originals := make(map[runtime.Object]runtime.Object, len(copied))
		for i := range copied {
			if i < len(l.Items) {
				originals[copied[i]] = l.Items[i]
			}
		}
		return list, originals, nil
	}
	in, err := b.convert(obj)
	if err != nil {
		return nil, nil, err
	}
	return in, map[runtime.Object]runtime.Object{in: obj}, nil
}

// convert turns one view object into a new internal object: unstructured → external type →
// defaults → internal type. The view object is not modified.
func (b *builtinTable) convert(obj runtime.Object) (runtime.Object, error) {
	u, err := contentOf(obj)
	if err != nil {
		return nil, err
	}
	ext, err := legacyscheme.Scheme.New(b.external)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), ext); err != nil {
		return nil, fmt.Errorf("converting %s/%s to %v: %w", u.GetNamespace(), u.GetName(), b.external, err)
	}
	legacyscheme.Scheme.Default(ext)
	in, err := legacyscheme.Scheme.New(b.internal)
	if err != nil {
		return nil, err
	}
	if err := legacyscheme.Scheme.Convert(ext, in, nil); err != nil {
		return nil, fmt.Errorf("converting %s/%s to the internal %v: %w", u.GetNamespace(), u.GetName(), b.internal.Kind, err)
	}
	return in, nil
}
