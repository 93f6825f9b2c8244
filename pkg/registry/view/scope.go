package view

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers"
	"k8s.io/apiserver/pkg/registry/rest"
)

// newRequestScope builds the handlers.RequestScope of one view resource, the way
// apiextensions-apiserver builds one per custom resource version: unstructured objects, the
// view serializer, and the storage's Table convertor.
func newRequestScope(gvr schema.GroupVersionResource, kind string, namespaced bool, ser runtime.NegotiatedSerializer, table rest.TableConvertor) *handlers.RequestScope {
	return &handlers.RequestScope{
		Namer:                    handlers.ContextBasedNaming{Namer: meta.NewAccessor(), ClusterScoped: !namespaced},
		Serializer:               ser,
		ParameterCodec:           runtime.NewParameterCodec(metaScheme),
		Creater:                  unstructuredCreater{},
		Convertor:                fieldLabelConvertor{},
		Typer:                    unstructuredTyper{},
		UnsafeConvertor:          fieldLabelConvertor{},
		EquivalentResourceMapper: runtime.NewEquivalentResourceRegistry(),
		TableConvertor:           table,
		Resource:                 gvr,
		Kind:                     gvr.GroupVersion().WithKind(kind),
		MetaGroupVersion:         metav1.SchemeGroupVersion,
		HubGroupVersion:          gvr.GroupVersion(),
	}
}

// fieldLabelConvertor is the runtime.ObjectConvertor of view scopes. Views serve every object
// in the version the source serves it, so no conversion happens; field selectors accept the
// fields every resource supports (metadata.name, metadata.namespace).
type fieldLabelConvertor struct{}

// Convert is not supported: views never convert objects.
func (fieldLabelConvertor) Convert(in, out, context interface{}) error {
	return fmt.Errorf("views do not convert objects")
}

// ConvertToVersion returns in unchanged if it already is of the target version.
func (fieldLabelConvertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	if _, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{in.GetObjectKind().GroupVersionKind()}); ok {
		return in, nil
	}
	return nil, fmt.Errorf("views serve %v only in its source version", in.GetObjectKind().GroupVersionKind())
}

// ConvertFieldLabel accepts metadata.name and metadata.namespace.
func (fieldLabelConvertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return runtime.DefaultMetaV1FieldSelectorConversion(label, value)
}
