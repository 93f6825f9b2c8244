package verify

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
)

// TestCheckerPerCluster checks the per-cluster part of a report on two logical clusters whose
// ns/name meet on the target (the target was filled under "same", so auto resolves to same):
// the cluster whose copy holds the place is in sync, the other is a conflict that names it,
// and the orphan of a third cluster counts for that cluster. Contents are not compared
// (SkipContent), so the fake target only answers the GET of a missing copy.
func TestCheckerPerCluster(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	viewObj := func(cluster, ns, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"namespace": ns, "name": name, "uid": cluster + "-" + ns + "-" + name,
				"annotations": map[string]interface{}{contract.ClusterAnnotation: cluster}},
		}}
	}
	copyOf := eastCopyOf
	target := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"})
	// The view's per-cluster paths hold nothing: a GET of the orphan's source answers 404.
	emptyView := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"})
	c := &checker{
		cfg:         Config{Location: "east", NamespaceMapping: mapper.NamespaceMappingAuto, ClusterName: mapper.DefaultClusterName, SkipContent: true},
		clusterView: func(string) (dynamic.Interface, error) { return emptyView, nil },
		target:      target, report: &Report{Location: "east"}, clusters: map[string]*ClusterReport{},
	}
	lists := []*resourceLists{{
		gvr: gvr, namespaced: true, served: true,
		view:    []*unstructured.Unstructured{viewObj("c2", "ns", "x"), viewObj("c1", "ns", "x"), viewObj("c1", "ns", "y")},
		managed: []*unstructured.Unstructured{copyOf("c1", "ns", "x"), copyOf("c3", "ns", "z")},
	}}
	if err := c.resolveMapping(lists); err != nil {
		t.Fatal(err)
	}
	if c.report.NamespaceMapping != "same" || !strings.HasPrefix(c.report.NamespaceMappingReason, "auto: the target holds 2 copies placed by") {
		t.Fatalf("mapping %q (%s)", c.report.NamespaceMapping, c.report.NamespaceMappingReason)
	}
	if err := c.resource(context.Background(), lists[0]); err != nil {
		t.Fatal(err)
	}
	c.report.finish(c.clusters)
	r := c.report
	want := []ClusterReport{
		{Name: "c1", Assigned: 2, InSync: 1, Violations: 1},
		{Name: "c2", Assigned: 1, InSync: 0, Violations: 1},
		{Name: "c3", Assigned: 0, InSync: 0, Violations: 1},
	}
	if len(r.Clusters) != len(want) {
		t.Fatalf("clusters %+v", r.Clusters)
	}
	for i := range want {
		if r.Clusters[i] != want[i] {
			t.Errorf("cluster %d = %+v, want %+v", i, r.Clusters[i], want[i])
		}
	}
	if r.Total != 3 || r.Count(1) != 2 || r.Count(4) != 1 {
		t.Fatalf("violations: %+v", r.Violations)
	}
	for _, v := range r.Violations {
		switch {
		case v.Cluster == "c2" && (v.Invariant != 1 || !strings.Contains(v.Message, "copy of c1|ns/x (conflict)")):
			t.Errorf("c2's collision: %+v", v)
		case v.Cluster == "c1" && (v.Invariant != 1 || v.Target != "ns/y" || v.Message != "missing on the target"):
			t.Errorf("c1's missing copy: %+v", v)
		case v.Cluster == "c3" && (v.Invariant != 4 || v.Target != "ns/z"):
			t.Errorf("c3's orphan: %+v", v)
		case v.Cluster == "":
			t.Errorf("a violation without a cluster: %+v", v)
		}
	}
}

// eastCopyOf returns east's managed copy of the ConfigMap ns/name of cluster, at the same place
// on the target, its source uid "<cluster>-<ns>-<name>".
func eastCopyOf(cluster, ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"namespace": ns, "name": name,
			"labels": map[string]interface{}{contract.LocationLabel: "east"},
			"annotations": map[string]interface{}{
				contract.SourceClusterAnnotation: cluster, contract.SourceNamespaceAnnotation: ns, contract.SourceNameAnnotation: name,
				contract.SourceUIDAnnotation: cluster + "-" + ns + "-" + name,
			}},
	}}
}

// TestCheckerKeepsWhatTheViewWithholds: a managed copy that the view does not list is an orphan
// (invariant 4) only when a GET through the view's cluster path answers 404, as the mapper
// deletes only then (mapper.GoneFromView); a copy whose source the view withholds (503) or
// whose resource it has not synced (429) is reported as kept, with the view's answer.
func TestCheckerKeepsWhatTheViewWithholds(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	view := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"})
	view.PrependReactor("get", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch a.(clienttesting.GetAction).GetName() {
		case "withheld":
			return true, nil, apierrors.NewServiceUnavailable("its rendering fails")
		case "unsynced":
			return true, nil, apierrors.NewTooManyRequests("the resource has not synced", 1)
		}
		return true, nil, apierrors.NewNotFound(gvr.GroupResource(), "gone")
	})
	target := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"})
	c := &checker{
		cfg:         Config{Location: "east", NamespaceMapping: mapper.NamespaceMappingSame, ClusterName: mapper.DefaultClusterName, SkipContent: true},
		clusterView: func(string) (dynamic.Interface, error) { return view, nil },
		target:      target, report: &Report{Location: "east"}, clusters: map[string]*ClusterReport{},
	}
	l := &resourceLists{gvr: gvr, namespaced: true, served: true,
		managed: []*unstructured.Unstructured{eastCopyOf("c1", "ns", "withheld"), eastCopyOf("c1", "ns", "unsynced"), eastCopyOf("c1", "ns", "gone")}}
	if err := c.resource(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	r := c.report
	if len(r.Violations) != 1 || r.Violations[0].Invariant != 4 || r.Violations[0].Target != "ns/gone" {
		t.Errorf("violations %+v, want the orphan ns/gone alone", r.Violations)
	}
	kept := map[string]string{}
	for _, k := range r.Kept {
		kept[k.Target] = k.Message
	}
	if len(kept) != 2 || !strings.Contains(kept["ns/withheld"], "its rendering fails") || !strings.Contains(kept["ns/unsynced"], "has not synced") {
		t.Errorf("kept %+v, want ns/withheld and ns/unsynced with the view's answers", r.Kept)
	}
}

// TestCheckerAutoTwoClusters checks that verify resolves auto to prefixed for a fresh target
// and a view with two clusters, as the mapper does, and then finds both copies missing at
// their prefixed places.
func TestCheckerAutoTwoClusters(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	obj := func(cluster string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"namespace": "ns", "name": "x", "uid": cluster + "-x",
				"annotations": map[string]interface{}{contract.ClusterAnnotation: cluster}},
		}}
	}
	target := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"})
	c := &checker{cfg: Config{Location: "east", NamespaceMapping: mapper.NamespaceMappingAuto, ClusterName: "default", SkipContent: true},
		target: target, report: &Report{}, clusters: map[string]*ClusterReport{}}
	lists := []*resourceLists{{gvr: gvr, namespaced: true, served: true, view: []*unstructured.Unstructured{obj("c1"), obj("c2")}}}
	if err := c.resolveMapping(lists); err != nil || c.report.NamespaceMapping != "prefixed" {
		t.Fatalf("mapping %q (%s), %v", c.report.NamespaceMapping, c.report.NamespaceMappingReason, err)
	}
	if err := c.resource(context.Background(), lists[0]); err != nil {
		t.Fatal(err)
	}
	c.report.finish(c.clusters)
	targets := []string{}
	for _, v := range c.report.Violations {
		targets = append(targets, v.Cluster+">"+v.Target)
	}
	if got := strings.Join(targets, " "); got != "c1>c1-ns/x c2>c2-ns/x" {
		t.Fatalf("violations at %s", got)
	}
}

// TestCheckerIdentity (docs/customization.md, "What a rendering may not change"): verify reports, under invariant 2, what a
// rendering that changed an object's identity leaves: two view objects under one identity, a
// view object without a uid, a copy whose source uid is not the view object's, and a copy whose
// marks name a source placed elsewhere; an intact copy is in sync.
func TestCheckerIdentity(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	viewObj := func(ns, name, uid string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"namespace": ns, "name": name,
				"annotations": map[string]interface{}{contract.ClusterAnnotation: "default"}},
		}}
		if uid != "" {
			u.SetUID(types.UID(uid))
		}
		return u
	}
	copyAt := func(ns, name, srcNS, srcName, uid string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"namespace": ns, "name": name,
				"labels": map[string]interface{}{contract.LocationLabel: "east"},
				"annotations": map[string]interface{}{
					contract.SourceClusterAnnotation: "default", contract.SourceNamespaceAnnotation: srcNS, contract.SourceNameAnnotation: srcName,
					contract.SourceUIDAnnotation: uid,
				}},
		}}
	}
	target := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"})
	c := &checker{
		cfg:    Config{Location: "east", NamespaceMapping: mapper.NamespaceMappingSame, ClusterName: "default", SkipContent: true},
		target: target, report: &Report{Location: "east"}, clusters: map[string]*ClusterReport{},
	}
	l := &resourceLists{gvr: gvr, namespaced: true, served: true,
		view: []*unstructured.Unstructured{
			viewObj("tenant-b", "victim", "uid-victim"), viewObj("tenant-b", "victim", "uid-hijacker"), // a hijack
			viewObj("tenant-b", "nouid", ""),
			viewObj("tenant-b", "swapped", "uid-new"),
			viewObj("tenant-b", "intact", "uid-intact"),
		},
		managed: []*unstructured.Unstructured{
			copyAt("tenant-b", "victim", "tenant-b", "victim", ""), // the hijacker had no uid
			copyAt("tenant-b", "nouid", "tenant-b", "nouid", ""),
			copyAt("tenant-b", "swapped", "tenant-b", "swapped", "uid-old"),
			copyAt("tenant-b", "intact", "tenant-b", "intact", "uid-intact"),
			copyAt("kube-system", "moved", "tenant-a", "moved", "uid-moved"),
		},
	}
	if err := c.resource(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range c.report.Violations {
		if v.Invariant != 2 {
			t.Errorf("unexpected violation %+v", v)
			continue
		}
		got[v.Source+" "+v.Target] += v.Message + "; "
	}
	for key, want := range map[string]string{
		"default|tenant-b/victim ":                  "2 objects under this identity",
		"default|tenant-b/victim tenant-b/victim":   `copy names source uid ""`,
		"default|tenant-b/nouid ":                   "without a uid",
		"default|tenant-b/swapped tenant-b/swapped": `uid "uid-old", the view's object has uid "uid-new"`,
		"default|tenant-a/moved kube-system/moved":  "place on the target is tenant-a/moved",
	} {
		if !strings.Contains(got[key], want) {
			t.Errorf("%s: %q, want %q", key, got[key], want)
		}
	}
	for key := range got {
		if strings.Contains(key, "intact") {
			t.Errorf("an intact copy is reported: %s %s", key, got[key])
		}
	}
	t.Log(got)
}

// TestCheckerStatusInViewGenerations (invariant 3): a Deployment that reflects status, whose
// view shows generation 3 while its copy on the target has generation 1 (changes the view
// shows were applied to the copy as one create). The copy's controller observed generation 1,
// which the mapper reports as the view generation 3 the copy was applied from
// (mapper.ReportedStatus); verify compares that, not the copy's raw .status, and reports
// nothing. A copy whose status differs otherwise is reported.
func TestCheckerStatusInViewGenerations(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	status := func(observed int64, ready int64) map[string]interface{} {
		return map[string]interface{}{"observedGeneration": observed, "readyReplicas": ready}
	}
	view := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]interface{}{"namespace": "ns", "name": "web", "generation": int64(3), "uid": "uid-web",
			"annotations": map[string]interface{}{contract.ClusterAnnotation: "default", contract.StatusPolicyAnnotation: contract.StatusPolicyReflect}},
		"status": status(3, 2),
	}}
	copyWith := func(ready int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]interface{}{"namespace": "ns", "name": "web", "generation": int64(1),
				"labels": map[string]interface{}{contract.LocationLabel: "east"},
				"annotations": map[string]interface{}{
					contract.SourceClusterAnnotation: "default", contract.SourceNamespaceAnnotation: "ns", contract.SourceNameAnnotation: "web",
					contract.SourceGenerationAnnotation: "3", contract.SourceUIDAnnotation: "uid-web",
				}},
			"status": status(1, ready),
		}}
	}
	for _, c := range []struct {
		name       string
		ready      int64
		violations int
	}{
		{"the copy reports what the view shows", 2, 0},
		{"the copy reports other replicas", 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "DeploymentList"})
			ch := &checker{cfg: Config{Location: "east", NamespaceMapping: mapper.NamespaceMappingSame, ClusterName: "default", SkipContent: true},
				target: target, report: &Report{Location: "east"}, clusters: map[string]*ClusterReport{}}
			l := &resourceLists{gvr: gvr, namespaced: true, served: true, view: []*unstructured.Unstructured{view}, managed: []*unstructured.Unstructured{copyWith(c.ready)}}
			if err := ch.resource(context.Background(), l); err != nil {
				t.Fatal(err)
			}
			ch.report.finish(ch.clusters)
			if ch.report.Total != c.violations || ch.report.Count(3) != c.violations {
				t.Fatalf("%d violations, want %d under invariant 3: %+v", ch.report.Total, c.violations, ch.report.Violations)
			}
		})
	}
}
