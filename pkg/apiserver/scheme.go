package apiserver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/install"
)

var (
	// Scheme holds the mapper.kcp.io types and the meta types the server writes.
	Scheme = runtime.NewScheme()
	// Codecs encodes and decodes the mapper.kcp.io types.
	Codecs = serializer.NewCodecFactory(Scheme)
	// ParameterCodec decodes query parameters into the group's options types (list options, the
	// view's connect options).
	ParameterCodec = runtime.NewParameterCodec(Scheme)
)

func init() {
	install.Install(Scheme)
	// The legacy "v1" meta types (WatchEvent, Status, discovery) as every generic API server has them.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	Scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)
}
