package apiserver

import (
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestLocationGrant(t *testing.T) {
	subjects, err := GrantSubjects([]string{"u"}, []string{"g"}, []string{"ns/sa"})
	if err != nil {
		t.Fatal(err)
	}
	objects, err := LocationGrant("east", subjects)
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, o := range objects {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			rules = append(rules, o.Rules...)
		case *rbacv1.Role:
			if o.Namespace != LeaseNamespace {
				t.Errorf("Role in %q", o.Namespace)
			}
			rules = append(rules, o.Rules...)
		case *rbacv1.ClusterRoleBinding:
			if len(o.Subjects) != 3 {
				t.Errorf("subjects = %v", o.Subjects)
			}
		}
	}
	want := map[string]string{
		"mapper.kcp.io/locations/proxy":            "get,watch,update,patch,create,delete",
		"control.mapper.kcp.io/synctargets/status": "get,update,patch",
		"coordination.k8s.io/leases":               "get,update",
	}
	if len(rules) != len(want) {
		t.Fatalf("rules = %+v", rules)
	}
	for _, r := range rules {
		key := r.APIGroups[0] + "/" + r.Resources[0]
		if got := strings.Join(r.Verbs, ","); want[key] != got {
			t.Errorf("%s verbs = %s, want %s", key, got, want[key])
		}
		if len(r.ResourceNames) != 1 || r.ResourceNames[0] != "east" {
			t.Errorf("%s resourceNames = %v, want [east]", key, r.ResourceNames)
		}
	}
	data, err := GrantYAML(objects)
	if err != nil || strings.Count(string(data), "\n---\n") != len(objects)-1 || !strings.Contains(string(data), "kind: Lease") {
		t.Errorf("GrantYAML: %v\n%s", err, data)
	}
	if _, err := LocationGrant("East.1", subjects); err == nil {
		t.Error("an invalid location was accepted")
	}
	if _, err := LocationGrant("east", nil); err == nil {
		t.Error("no subjects was accepted")
	}
	if _, err := GrantSubjects(nil, nil, []string{"nonamespace"}); err == nil {
		t.Error("a service account without namespace was accepted")
	}
}

// TestLocationShardsGrant: with --shards=N the Lease rule names, and the grant pre-creates,
// the location's Lease and each shard's, and nothing else changes.
func TestLocationShardsGrant(t *testing.T) {
	subjects, err := GrantSubjects([]string{"u"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := LocationShardsGrant("east", 3, subjects)
	if err != nil {
		t.Fatal(err)
	}
	var leases, leaseRule []string
	for _, o := range objects {
		switch o := o.(type) {
		case *coordinationv1.Lease:
			leases = append(leases, o.Name)
		case *rbacv1.Role:
			leaseRule = o.Rules[0].ResourceNames
		case *rbacv1.ClusterRole:
			for _, r := range o.Rules {
				if len(r.ResourceNames) != 1 || r.ResourceNames[0] != "east" {
					t.Errorf("%v: resourceNames %v, want [east]", r.Resources, r.ResourceNames)
				}
			}
		}
	}
	want := "east east.0-of-3 east.1-of-3 east.2-of-3"
	if strings.Join(leases, " ") != want || strings.Join(leaseRule, " ") != want {
		t.Fatalf("Leases %v, Lease rule %v; want %s", leases, leaseRule, want)
	}
	for _, n := range []int{-1, 1025} {
		if _, err := LocationShardsGrant("east", n, subjects); err == nil {
			t.Errorf("--shards=%d was accepted", n)
		}
	}
}
