package view

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// List is the list a view returns for a resource: the resource's own list kind
// (e.g. ConfigMapList, apiVersion v1) whose items are the cache's shared object versions.
//
// Items are runtime.Objects that marshal themselves from bytes encoded once per object version
// (cache.Object implements json.Marshaler), so writing a list re-encodes no item. The shape
// (TypeMeta, ListMeta, Items) is what apimachinery's streaming collection encoder and
// meta.ExtractList expect of a list.
type List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []runtime.Object `json:"items"`
}

// DeepCopyObject returns a copy of the list whose items are deep copies.
func (l *List) DeepCopyObject() runtime.Object {
	out := &List{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]runtime.Object, len(l.Items))
	for i := range l.Items {
		out.Items[i] = l.Items[i].DeepCopyObject()
	}
	return out
}
