// Package sourcetest holds discovery documents for tests of the packages that read the source's
// discovery (pkg/source, pkg/cache): a few built-in groups and a custom group served at two
// versions.
package sourcetest

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

var (
	// CoreV1 is the core group: configmaps, events, nodes, bindings (create only), pods and pods/status.
	CoreV1 = &metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Kind: "ConfigMap", SingularName: "configmap", Namespaced: true, ShortNames: []string{"cm"}, Verbs: []string{"get", "list", "watch", "create"}},
		{Name: "events", Kind: "Event", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
		{Name: "nodes", Kind: "Node", Namespaced: false, Verbs: []string{"get", "list", "watch"}},
		{Name: "bindings", Kind: "Binding", Namespaced: true, Verbs: []string{"create"}},
		{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
		{Name: "pods/status", Kind: "Pod", Namespaced: true, Verbs: []string{"get", "patch", "update"}},
	}}
	// AppsV1 is apps/v1: deployments (category all) and deployments/status.
	AppsV1 = &metav1.APIResourceList{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "deployments", Kind: "Deployment", SingularName: "deployment", Namespaced: true, Categories: []string{"all"}, Verbs: []string{"get", "list", "watch"}},
		{Name: "deployments/status", Kind: "Deployment", Namespaced: true, Verbs: []string{"get", "patch", "update"}},
	}}
	// CoordinationV1 is coordination.k8s.io/v1: leases.
	CoordinationV1 = &metav1.APIResourceList{GroupVersion: "coordination.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "leases", Kind: "Lease", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
	}}
	// EventsV1 is events.k8s.io/v1: events.
	EventsV1 = &metav1.APIResourceList{GroupVersion: "events.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "events", Kind: "Event", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
	}}
	// WidgetsV1 is example.com/v1, a custom resource group: widgets.
	WidgetsV1 = &metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
	}}
	// WidgetsV2 is example.com/v2: widgets and gadgets.
	WidgetsV2 = &metav1.APIResourceList{GroupVersion: "example.com/v2", APIResources: []metav1.APIResource{
		{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
		{Name: "gadgets", Kind: "Gadget", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
	}}
)
