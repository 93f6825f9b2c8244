package source

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/source/sourcetest"
)

func gvrs(infos []ResourceInfo) []string {
	var out []string
	for _, i := range infos {
		out = append(out, i.GVR.String())
	}
	return out
}

func TestSelectResources(t *testing.T) {
	groups := []*metav1.APIGroup{
		{Name: "", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "v1", Version: "v1"}}, PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "v1", Version: "v1"}},
		{Name: "apps", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "apps/v1", Version: "v1"}}, PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "apps/v1", Version: "v1"}},
		{Name: "coordination.k8s.io", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "coordination.k8s.io/v1", Version: "v1"}}},
		{Name: "events.k8s.io", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "events.k8s.io/v1", Version: "v1"}}},
		// v1 listed first but v2 preferred: widgets at v2; a resource only in v1 would stay at v1.
		{Name: "example.com", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "example.com/v1", Version: "v1"}, {GroupVersion: "example.com/v2", Version: "v2"}}, PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "example.com/v2", Version: "v2"}},
	}
	lists := []*metav1.APIResourceList{sourcetest.CoreV1, sourcetest.AppsV1, sourcetest.CoordinationV1, sourcetest.EventsV1, sourcetest.WidgetsV1, sourcetest.WidgetsV2}
	got := selectResources(groups, lists, nil)
	want := "[/v1, Resource=configmaps /v1, Resource=pods apps/v1, Resource=deployments example.com/v2, Resource=gadgets example.com/v2, Resource=widgets]"
	if s := fmtList(gvrs(got)); s != want {
		t.Fatalf("default selection:\n got %s\nwant %s", s, want)
	}
	for _, i := range got {
		switch i.GVR.Resource {
		case "deployments":
			if !i.HasStatus || i.Kind != "Deployment" || i.ListKind != "DeploymentList" || i.Categories[0] != "all" || !i.Namespaced {
				t.Errorf("deployments info %+v", i)
			}
		case "configmaps":
			if i.HasStatus || i.ShortNames[0] != "cm" || i.SingularName != "configmap" {
				t.Errorf("configmaps info %+v", i)
			}
		case "pods":
			if !i.HasStatus {
				t.Errorf("pods info %+v", i)
			}
		}
	}
	// Explicit selection: cluster-scoped and default-excluded resources can be named; a resource
	// without list/watch cannot.
	got = selectResources(groups, lists, []schema.GroupResource{{Resource: "nodes"}, {Group: "coordination.k8s.io", Resource: "leases"}, {Resource: "bindings"}, {Resource: "nope"}})
	if s := fmtList(gvrs(got)); s != "[/v1, Resource=nodes coordination.k8s.io/v1, Resource=leases]" {
		t.Fatalf("explicit selection: %s", s)
	}
}

func fmtList(s []string) string {
	out := "["
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out + "]"
}
