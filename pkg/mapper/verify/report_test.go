package verify

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestReport(t *testing.T) {
	r := &Report{Location: "east", Resources: []string{"configmaps"}, ViewObjects: 2, ManagedObjects: 2,
		NamespaceMapping: "prefixed", NamespaceMappingReason: "set explicitly"}
	r.add(Violation{Invariant: 4, Resource: "configmaps", Cluster: "c", Source: "c|ns/b", Target: "ns/b", Message: "orphan"})
	r.add(Violation{Invariant: 1, Resource: "configmaps", Cluster: "c", Source: "c|ns/a", Target: "ns/a", Message: "missing on the target"})
	r.finish(map[string]*ClusterReport{"d": {Name: "d", Assigned: 1, InSync: 1}, "c": {Name: "c", Assigned: 1, Violations: 2}})
	if r.Total != 2 || r.Count(1) != 1 || r.Count(4) != 1 || r.Count(2) != 0 || r.Violations[0].Invariant != 1 {
		t.Fatalf("report = %+v", r)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"namespace mapping prefixed (set explicitly)\ncluster c: 1 assigned, 0 in sync, 2 violations\ncluster d: 1 assigned, 1 in sync, 0 violations\n",
		"invariant 1 (every object assigned to the location exists on the target, up to date): 1 violations\n  configmaps source c|ns/a target ns/a: missing on the target\n",
		"invariant 2 (every target object the mapper manages carries metadata naming its source): 0 violations\n",
		"total: 2 violations\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || !reflect.DeepEqual(&back, r) {
		t.Errorf("JSON round trip: %v\n%s", err, js.String())
	}
	if c, ok := r.Cluster("d"); !ok || c.InSync != 1 {
		t.Errorf("Cluster(d) = %+v, %v", c, ok)
	}
	empty := &Report{}
	empty.finish(nil)
	if empty.Violations == nil || empty.Clusters == nil || empty.Total != 0 {
		t.Errorf("an empty report must list no violations as [], not null: %+v", empty)
	}
}

func TestDifferingFields(t *testing.T) {
	a := &unstructured.Unstructured{Object: map[string]interface{}{
		"metadata": map[string]interface{}{"name": "x", "resourceVersion": "1", "managedFields": []interface{}{"a"}, "labels": map[string]interface{}{"a": "1"}},
		"data":     map[string]interface{}{"k": "v"},
	}}
	b := a.DeepCopy()
	b.SetResourceVersion("2")
	b.Object["metadata"].(map[string]interface{})["managedFields"] = []interface{}{"b"}
	if d := differingFields(a, b); len(d) != 0 {
		t.Errorf("bookkeeping-only changes reported: %v", d)
	}
	b.SetLabels(nil)
	b.Object["data"] = map[string]interface{}{"k": "w"}
	b.Object["spec"] = map[string]interface{}{}
	if d := differingFields(a, b); !reflect.DeepEqual(d, []string{"data", "metadata.labels", "spec"}) {
		t.Errorf("differingFields = %v", d)
	}
}
