package e2e

import (
	"context"
	"net"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// mapperTransformCase is a source object, and what applying it onto another cluster shows.
type mapperTransformCase struct {
	resource string
	yaml     string
	// rawFails: applying the source object as read (only uid, resourceVersion,
	// creationTimestamp, generation, managedFields and status removed) is rejected by the
	// target. It is why mapper.Transform has a rule for the kind.
	rawFails bool
	// check inspects the applied target copy.
	check func(t *testing.T, target *unstructured.Unstructured)
}

// TestMapperTransform finds and proves the transform's field list: every kind is created in a
// real source, read back with everything the source's API server filled in, and applied with
// server-side apply onto a real target whose Service IP and node-port ranges differ from the
// source's (as two clusters' do). The raw object is rejected where a kind-specific rule
// exists; the transformed one is accepted for every kind.
func TestMapperTransform(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cps := framework.StartControlPlanes(t,
		framework.ControlPlaneOptions{Name: "source"},
		framework.ControlPlaneOptions{Name: "target", ExtraArgs: []string{
			"--service-cluster-ip-range=10.96.0.0/24",
			"--service-node-port-range=31000-31999",
		}},
	)
	src, dst := dynamicClientFor(t, cps[0]), dynamicClientFor(t, cps[1])
	for _, d := range []dynamic.Interface{src, dst} {
		ensureNamespace(t, ctx, d, "apps")
		createCRD(t, ctx, d, "widgets", "Widget")
	}
	_, targetRange, _ := net.ParseCIDR("10.96.0.0/24")

	cases := mapperTransformCases(targetRange)
	for _, c := range cases {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(c.yaml), &obj.Object); err != nil {
			t.Fatal(err)
		}
		gv, _ := schema.ParseGroupVersion(obj.GetAPIVersion())
		gvr := gv.WithResource(c.resource)
		t.Run(c.resource+"/"+obj.GetName(), func(t *testing.T) {
			created, err := src.Resource(gvr).Namespace("apps").Create(ctx, obj, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("creating in the source: %v", err)
			}
			if gvr.Resource == "widgets" {
				created.Object["status"] = map[string]interface{}{"phase": "Ready"}
				if created, err = src.Resource(gvr).Namespace("apps").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}

			raw := created.DeepCopy()
			for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"} {
				unstructured.RemoveNestedField(raw.Object, "metadata", f)
			}
			unstructured.RemoveNestedField(raw.Object, "status")
			_, rawErr := dst.Resource(gvr).Namespace("apps").Apply(ctx, raw.GetName(), raw, metav1.ApplyOptions{FieldManager: "test", DryRun: []string{metav1.DryRunAll}})
			if c.rawFails && rawErr == nil {
				t.Errorf("the raw source object was accepted: then the kind needs no rule")
			}
			if !c.rawFails && rawErr != nil {
				t.Logf("the raw source object was rejected (%v): this kind needs a rule", rawErr)
			}

			desired := mapper.Transform(created, mapper.TargetObject{Location: "east", Namespace: "apps",
				Source: mapper.SourceRef{Cluster: "default", Namespace: "apps", Name: created.GetName()}})
			applied, err := dst.Resource(gvr).Namespace("apps").Apply(ctx, desired.GetName(), desired, metav1.ApplyOptions{FieldManager: mapper.DefaultFieldManager})
			if err != nil {
				t.Fatalf("applying the transformed object onto the target: %v", err)
			}
			if ref, _, ok := mapper.MarkedSource(applied, "east", true); !ok || ref.Name != created.GetName() {
				t.Errorf("the target copy is not marked as the mapper's: %v %v", applied.GetLabels(), applied.GetAnnotations())
			}
			if gvr.Resource == "widgets" && applied.Object["status"] != nil {
				t.Errorf("the source's status was applied: %v", applied.Object["status"])
			}
			if c.check != nil {
				c.check(t, applied)
			}
		})
	}
}

// mapperTransformCases are the source objects of TestMapperTransform, one per built-in kind
// rule plus a custom resource (widgets), all in namespace "apps"; targetRange is the target's
// Service IP range that the Service checks expect. TestKubectlTablesMatchKubeAPIServer prints
// the same objects.
func mapperTransformCases(targetRange *net.IPNet) []mapperTransformCase {
	return []mapperTransformCase{
		{resource: "services", rawFails: true, yaml: `{apiVersion: v1, kind: Service, metadata: {name: cluster-ip}, spec: {selector: {app: a}, ports: [{port: 80}]}}`,
			check: func(t *testing.T, u *unstructured.Unstructured) {
				ip, _, _ := unstructured.NestedString(u.Object, "spec", "clusterIP")
				if !targetRange.Contains(net.ParseIP(ip)) {
					t.Errorf("clusterIP %q is not from the target's range", ip)
				}
			}},
		{resource: "services", rawFails: true, yaml: `{apiVersion: v1, kind: Service, metadata: {name: node-port}, spec: {type: NodePort, selector: {app: a}, ports: [{port: 80, nodePort: 30080}]}}`,
			check: func(t *testing.T, u *unstructured.Unstructured) {
				ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
				if np := ports[0].(map[string]interface{})["nodePort"].(int64); np < 31000 || np > 31999 {
					t.Errorf("nodePort %d is not from the target's range", np)
				}
			}},
		{resource: "services", rawFails: true, yaml: `{apiVersion: v1, kind: Service, metadata: {name: load-balancer}, spec: {type: LoadBalancer, externalTrafficPolicy: Local, selector: {app: a}, ports: [{port: 80}]}}`},
		{resource: "services", yaml: `{apiVersion: v1, kind: Service, metadata: {name: headless}, spec: {clusterIP: None, selector: {app: a}, ports: [{port: 80}]}}`,
			check: func(t *testing.T, u *unstructured.Unstructured) {
				if ip, _, _ := unstructured.NestedString(u.Object, "spec", "clusterIP"); ip != "None" {
					t.Errorf("a headless Service became %q", ip)
				}
			}},
		{resource: "services", yaml: `{apiVersion: v1, kind: Service, metadata: {name: external}, spec: {type: ExternalName, externalName: example.com}}`},
		{resource: "jobs", rawFails: true, yaml: `{apiVersion: batch/v1, kind: Job, metadata: {name: job}, spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: x}]}}}}`,
			check: func(t *testing.T, u *unstructured.Unstructured) {
				sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
				if sel["batch.kubernetes.io/controller-uid"] != string(u.GetUID()) {
					t.Errorf("the selector %v is not the target Job's own", sel)
				}
			}},
		{resource: "cronjobs", yaml: `{apiVersion: batch/v1, kind: CronJob, metadata: {name: cron}, spec: {schedule: "* * * * *", jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: x}]}}}}}}`},
		{resource: "deployments", yaml: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: deploy}, spec: {selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: x}]}}}}`},
		{resource: "statefulsets", yaml: `{apiVersion: apps/v1, kind: StatefulSet, metadata: {name: sts}, spec: {serviceName: headless, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: x}]}}, volumeClaimTemplates: [{metadata: {name: data}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}]}}`},
		{resource: "daemonsets", yaml: `{apiVersion: apps/v1, kind: DaemonSet, metadata: {name: ds}, spec: {selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: x}]}}}}`},
		{resource: "persistentvolumeclaims", yaml: `{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: claim}, spec: {volumeName: pv-of-the-source, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}`,
			check: func(t *testing.T, u *unstructured.Unstructured) {
				if v, _, _ := unstructured.NestedString(u.Object, "spec", "volumeName"); v != "" {
					t.Errorf("the claim is bound to the source's volume %q", v)
				}
			}},
		{resource: "configmaps", yaml: `{apiVersion: v1, kind: ConfigMap, metadata: {name: cm}, data: {k: v}, binaryData: {b: AAE=}}`},
		{resource: "secrets", yaml: `{apiVersion: v1, kind: Secret, metadata: {name: secret}, type: Opaque, stringData: {k: v}}`},
		{resource: "serviceaccounts", yaml: `{apiVersion: v1, kind: ServiceAccount, metadata: {name: sa}}`},
		{resource: "roles", yaml: `{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: role}, rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]}`},
		{resource: "rolebindings", yaml: `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: binding}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: role}, subjects: [{kind: ServiceAccount, name: sa, namespace: apps}]}`},
		{resource: "ingresses", yaml: `{apiVersion: networking.k8s.io/v1, kind: Ingress, metadata: {name: ing}, spec: {rules: [{host: a.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: cluster-ip, port: {number: 80}}}}]}}]}}`},
		{resource: "networkpolicies", yaml: `{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: np}, spec: {podSelector: {matchLabels: {app: a}}, policyTypes: [Ingress]}}`},
		{resource: "poddisruptionbudgets", yaml: `{apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: pdb}, spec: {minAvailable: 1, selector: {matchLabels: {app: a}}}}`},
		{resource: "horizontalpodautoscalers", yaml: `{apiVersion: autoscaling/v2, kind: HorizontalPodAutoscaler, metadata: {name: hpa}, spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: deploy}, minReplicas: 1, maxReplicas: 3}}`},
		{resource: "widgets", yaml: `{apiVersion: example.com/v1, kind: Widget, metadata: {name: widget}, spec: {size: 3}}`},
	}
}
