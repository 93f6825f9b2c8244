package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	mapperv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestLocationsTable checks `kubectl get locations` and the unlistable-resource report on the real control plane,
// with real kubectl through the source's aggregator. mapper-apiserver's source identity may
// list ConfigMaps, SyncTargets and Leases (the rules of artifacts/rbac.yaml) but not the CRD
// gates.example.com. Then:
//   - a registered SyncTarget without objects is listed by `kubectl get locations`, READY from
//     its Ready condition, MODE and IN-SYNC from its status, HEARTBEAT the age of its Lease's
//     renewTime; a location seen only in an annotation is not (anyone who may annotate an
//     object could make the list long for everyone), but is with
//     `--field-selector status.registered=false`;
//   - `-o wide` adds the SyncTarget's labels and capacity;
//   - `-o json` (as -o yaml) shows gates.example.com in status.unsyncedResources, Forbidden.
func TestLocationsTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	source, src := startSource(t)
	admin := source.Admin().Client(t)
	framework.InstallControlCRDs(t, ctx, source)
	createCRD(t, ctx, src, "gates", "Gate")

	limited := source.NewUser(t, "mapper-apiserver-locations")
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: limited.Name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{controlv1alpha1.SchemeGroupVersion.Group}, Resources: []string{"synctargets"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"list", "watch"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: limited.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: limited.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: limited.Name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.StartAggregatedMapperAPIServer(t, source,
		"--source-kubeconfig="+limited.KubeconfigPath,
		"--resources=configmaps,gates.example.com",
		"--source-discovery-interval=1s",
	)

	// east: only an annotation. edge: a SyncTarget with a status and a Lease, no objects.
	ensureNamespace(t, ctx, src, "apps")
	if _, err := src.Resource(configMapsGVR).Namespace("apps").Create(ctx, newConfigMap("apps", "cm", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	u, err := src.Resource(synctarget.Resource).Create(ctx, newSyncTarget("edge", map[string]string{"region": "eu"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := synctarget.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	st.Status = controlv1alpha1.SyncTargetStatus{
		Conditions: []metav1.Condition{{Type: controlv1alpha1.SyncTargetReady, Status: metav1.ConditionTrue, Reason: controlv1alpha1.ReasonMapperReady, Message: "mapping", LastTransitionTime: metav1.Now()}},
		Mapper:     &controlv1alpha1.MapperStatus{Identity: "edge-host_1", Version: "v0.1.0", Mode: controlv1alpha1.ModePull},
		Objects:    &controlv1alpha1.ObjectCounts{Assigned: 0, InSync: 0, InViolation: 0},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		},
	}
	if _, err := synctarget.NewClient(src).UpdateStatus(ctx, st); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-mapper-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const heartbeatAge = 40 * time.Second
	renewed := metav1.NewMicroTime(time.Now().Add(-heartbeatAge))
	holder := "edge-host_1"
	if _, err := admin.CoordinationV1().Leases("cluster-mapper-system").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "edge"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renewed},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	kc := source.AdminKubeconfig()
	var header []string
	var rows map[string][]string
	var listedByDefault []string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		rows, listedByDefault = map[string][]string{}, nil
		for _, args := range [][]string{{"get", "locations"}, {"get", "locations", "--field-selector", "status.registered=false"}} {
			out, err := framework.RunKubectl(t, kc, args...)
			if err != nil {
				return false, nil
			}
			var all [][]string
			header, all = parseKubectlTable(t, out)
			for _, r := range all {
				rows[r[0]] = r
				if len(args) == 2 {
					listedByDefault = append(listedByDefault, r[0])
				}
			}
		}
		edge, east := rows["edge"], rows["east"]
		return edge != nil && east != nil && edge[1] == "True" && edge[7] != "<none>", nil
	})
	if err != nil {
		t.Fatalf("kubectl get locations never showed edge Ready with a heartbeat, and east with status.registered=false: header %v rows %v", header, rows)
	}
	if strings.Join(listedByDefault, " ") != "edge" {
		t.Errorf("kubectl get locations lists %v, want edge only (east has no SyncTarget)", listedByDefault)
	}
	if want := []string{"NAME", "READY", "MODE", "OBJECTS", "DELETING", "IN-SYNC", "WATCHERS", "HEARTBEAT", "PAUSED", "AGE"}; strings.Join(header, " ") != strings.Join(want, " ") {
		t.Fatalf("columns %v, want %v", header, want)
	}
	if edge := rows["edge"]; strings.Join(edge[:7], " ") != "edge True Pull 0 0 0 0" {
		t.Errorf("edge = %v, want READY True, MODE Pull, OBJECTS 0, DELETING 0, IN-SYNC 0, WATCHERS 0", edge)
	}
	if age, err := time.ParseDuration(rows["edge"][7]); err != nil || age < heartbeatAge || age > heartbeatAge+time.Minute {
		t.Errorf("edge HEARTBEAT %q, want the age of the Lease's renewTime (%s ago when created): %v", rows["edge"][7], heartbeatAge, err)
	}
	if east := rows["east"]; strings.Join(east[1:7], " ") != "<none> <none> 1 0 <none> 0" || east[7] != "<none>" || east[8] != "<none>" {
		t.Errorf("east (annotation only) = %v, want <none> for its registration columns and 1 object", east)
	}
	if edge := rows["edge"]; edge[8] != "false" {
		t.Errorf("edge PAUSED %q, want false", edge[8])
	}
	// PAUSED follows the SyncTarget's spec.paused and spec.haltedResources.
	for _, c := range []struct{ patch, want string }{
		{`{"spec":{"paused":true}}`, "true"},
		{`{"spec":{"paused":false,"haltedResources":["configmaps","gates.example.com"]}}`, "configmaps,gates.example.com"},
	} {
		if _, err := src.Resource(synctarget.Resource).Patch(ctx, "edge", types.MergePatchType, []byte(c.patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		var last string
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			out, err := framework.RunKubectl(t, kc, "get", "locations", "edge", "--no-headers")
			last = out
			f := strings.Fields(out)
			return err == nil && len(f) > 8 && f[8] == c.want, nil
		}); err != nil {
			t.Errorf("after %s, kubectl get locations edge never showed PAUSED %s: %s", c.patch, c.want, last)
		}
	}

	out, err := framework.RunKubectl(t, kc, "get", "locations", "edge", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	wideHeader, wideRows := parseKubectlTable(t, out)
	if len(wideRows) != 1 || len(wideHeader) != 12 || wideHeader[10] != "LABELS" || wideHeader[11] != "CAPACITY" {
		t.Fatalf("kubectl get locations edge -o wide:\n%s", out)
	}
	if got := wideRows[0][10:]; got[0] != "region=eu" || got[1] != "cpu=4,memory=16Gi,pods=110" {
		t.Errorf("edge LABELS, CAPACITY = %v, want region=eu and cpu=4,memory=16Gi,pods=110", got)
	}

	var loc mapperv1alpha1.Location
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		out, err := framework.RunKubectl(t, kc, "get", "locations", "east", "-o", "json")
		if err != nil || json.Unmarshal([]byte(out), &loc) != nil {
			return false, nil
		}
		return len(loc.Status.UnsyncedResources) > 0, nil
	})
	if err != nil {
		t.Fatalf("status.unsyncedResources never listed the forbidden resource: %+v", loc.Status)
	}
	if u := loc.Status.UnsyncedResources; len(u) != 1 || u[0].Group != "example.com" || u[0].Resource != "gates" || u[0].Reason != "Forbidden" || !strings.Contains(u[0].Message, "forbidden") {
		t.Errorf("status.unsyncedResources = %+v, want gates.example.com Forbidden with the source's message", u)
	}
	out, err = framework.RunKubectl(t, kc, "get", "locations", "edge", "-o", "yaml")
	if err != nil || !strings.Contains(out, "unsyncedResources:") || !strings.Contains(out, "reason: Forbidden") {
		t.Errorf("kubectl get locations edge -o yaml does not report the forbidden resource (%v):\n%s", err, out)
	}
}
