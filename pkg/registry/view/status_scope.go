package view

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/endpoints/handlers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// newWriteScope builds the RequestScope of a resource's writes through views, of its /status
// (subresource "status") or of the object itself (subresource "", the location's own
// finalizer): the read scope plus a field manager (server-side apply and managedFields
// bookkeeping over a deduced schema, as for a CRD without one) and the schema source strategic
// merge patches need.
func newWriteScope(info source.ResourceInfo, ser runtime.NegotiatedSerializer, subresource string) (*handlers.RequestScope, error) {
	scope := newRequestScope(info.GVR, info.Kind, info.Namespaced, ser, nil)
	scope.Subresource = subresource
	scope.UnsafeConvertor = strategicSchemaConvertor{}
	scope.Defaulter = noDefaults{}
	fm, err := managedfields.NewDefaultCRDFieldManager(managedfields.NewDeducedTypeConverter(), fieldLabelConvertor{}, noDefaults{}, unstructuredCreater{}, info.GVK(), info.GVK().GroupVersion(), subresource, nil)
	if err != nil {
		return nil, fmt.Errorf("field manager for %s: %w", info.GVR, err)
	}
	scope.FieldManager = fm
	return scope, nil
}

// statusPatchTypes are the patch types a write through a view accepts: JSON patch, merge patch and
// server-side apply for every resource, and strategic merge patch for the built-in types
// client-go knows (kube-apiserver does not offer it for custom resources either).
func statusPatchTypes(info source.ResourceInfo) []string {
	t := []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.ApplyYAMLPatchType)}
	if clientgoscheme.Scheme.Recognizes(info.GVK()) {
		t = append(t, string(types.StrategicMergePatchType))
	}
	return t
}

// strategicSchemaConvertor is the UnsafeConvertor of status scopes. It leaves objects as they
// are, except for the one conversion PatchResource asks for to learn the schema of a strategic
// merge patch: an empty object of the kind (the storage's New()) becomes client-go's typed
// object of that kind, whose struct tags carry the patch strategies.
type strategicSchemaConvertor struct{ fieldLabelConvertor }

// ConvertToVersion returns the typed schema object for an empty unstructured object of a
// built-in kind, and in itself otherwise.
func (c strategicSchemaConvertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	if u, ok := in.(*unstructured.Unstructured); ok && u.Object["metadata"] == nil {
		if typed, err := clientgoscheme.Scheme.New(u.GroupVersionKind()); err == nil {
			return typed, nil
		}
	}
	return c.fieldLabelConvertor.ConvertToVersion(in, gv)
}

// noDefaults is the defaulter of views: the source has defaulted its objects already.
type noDefaults struct{}

// Default does nothing.
func (noDefaults) Default(runtime.Object) {}
