package charts

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// scheme knows every kind the charts render except cert-manager's (whose Go types are not a
// dependency of this module): the built-in kinds, APIService and CustomResourceDefinition.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiregistrationv1.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
}

// strict decodes YAML or JSON into typed objects and fails on unknown or duplicate fields, as
// kube-apiserver's strict field validation does.
var strict = serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()

// DecodeTyped decodes one manifest into its typed Kubernetes object (a *appsv1.Deployment, an
// *apiregistrationv1.APIService, ...), strictly: an unknown field, a duplicate field or a value
// of the wrong type is an error naming the field. A kind this package has no Go type for is an
// error too.
func DecodeTyped(manifest []byte) (runtime.Object, error) {
	obj, gvk, err := strict.Decode(manifest, nil, nil)
	if err != nil {
		return nil, err
	}
	if gvk == nil || gvk.Kind == "" {
		return nil, fmt.Errorf("the manifest names no kind")
	}
	return obj, nil
}
