package mapper

import (
	"reflect"
	"testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// mustObject decodes y as a client-go client would decode the object's JSON (integers as
// int64).
func mustObject(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(j, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestTransformMetadata(t *testing.T) {
	src := mustObject(t, `
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  namespace: ns
  generateName: cm-
  uid: "1234"
  resourceVersion: "77"
  generation: 3
  creationTimestamp: "2024-01-01T00:00:00Z"
  deletionTimestamp: "2024-01-02T00:00:00Z"
  deletionGracePeriodSeconds: 30
  finalizers: [example.com/cleanup]
  ownerReferences: [{apiVersion: v1, kind: Pod, name: p, uid: "9"}]
  managedFields: [{manager: kubectl, operation: Update}]
  labels:
    app: web
    kcp.io/location: forged
    e2e.kcp.io/loc-east: ""
  annotations:
    note: kept
    kcp.io/assigned-locations: '["east"]'
    kcp.io/cluster: root
    kcp.io/status-policy: Reflect
    status.kcp.io/west: '{"ready":true}'
    kubectl.kubernetes.io/last-applied-configuration: '{}'
data:
  k: v
status:
  anything: dropped
`)
	got := Transform(src, TargetObject{Location: "east", Namespace: "root-ns", Source: SourceRef{Cluster: "root", Namespace: "ns", Name: "cm"}})
	want := mustObject(t, `
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  namespace: root-ns
  labels:
    app: web
    e2e.kcp.io/loc-east: ""
    kcp.io/location: east
  annotations:
    note: kept
    kcp.io/source-cluster: root
    kcp.io/source-namespace: ns
    kcp.io/source-name: cm
    kcp.io/source-uid: "1234"
    kcp.io/source-generation: "3"
data:
  k: v
`)
	if !reflect.DeepEqual(got.Object, want.Object) {
		g, _ := yaml.Marshal(got.Object)
		t.Errorf("Transform =\n%s", g)
	}
	if src.GetAnnotations()[contract.AssignedLocationsAnnotation] == "" || src.Object["status"] == nil {
		t.Error("Transform changed its input")
	}
}

func TestTransformClusterScoped(t *testing.T) {
	src := mustObject(t, `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: r, uid: "1"}, rules: []}`)
	got := Transform(src, TargetObject{Location: "east", Source: SourceRef{Cluster: "c", Name: "r"}})
	if got.GetNamespace() != "" {
		t.Errorf("namespace = %q", got.GetNamespace())
	}
	if _, ok := got.GetAnnotations()[contract.SourceNamespaceAnnotation]; ok {
		t.Error("a cluster-scoped copy got a source-namespace annotation")
	}
}

func TestTransformKindRules(t *testing.T) {
	cases := []struct {
		name, in string
		check    func(t *testing.T, out *unstructured.Unstructured)
	}{
		{"service allocations", `
apiVersion: v1
kind: Service
metadata: {name: s, namespace: ns}
spec:
  type: LoadBalancer
  clusterIP: 10.0.0.7
  clusterIPs: [10.0.0.7]
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  healthCheckNodePort: 31234
  externalTrafficPolicy: Local
  ports: [{name: http, port: 80, nodePort: 30080}]
`, func(t *testing.T, out *unstructured.Unstructured) {
			spec := out.Object["spec"].(map[string]interface{})
			for _, f := range []string{"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "healthCheckNodePort"} {
				if _, ok := spec[f]; ok {
					t.Errorf("spec.%s kept", f)
				}
			}
			if _, ok := spec["ports"].([]interface{})[0].(map[string]interface{})["nodePort"]; ok {
				t.Error("nodePort kept")
			}
			if spec["externalTrafficPolicy"] != "Local" || spec["type"] != "LoadBalancer" {
				t.Errorf("desired state lost: %v", spec)
			}
		}},
		{"headless service", `{apiVersion: v1, kind: Service, metadata: {name: s, namespace: ns}, spec: {clusterIP: None, clusterIPs: [None], ipFamilyPolicy: RequireDualStack, ipFamilies: [IPv4, IPv6]}}`,
			func(t *testing.T, out *unstructured.Unstructured) {
				spec := out.Object["spec"].(map[string]interface{})
				if spec["clusterIP"] != "None" || spec["ipFamilyPolicy"] != "RequireDualStack" || len(spec["ipFamilies"].([]interface{})) != 2 {
					t.Errorf("headless or dual-stack settings lost: %v", spec)
				}
			}},
		{"job with generated selector", `
apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ns, labels: {controller-uid: u, batch.kubernetes.io/controller-uid: u, job-name: j}}
spec:
  selector: {matchLabels: {batch.kubernetes.io/controller-uid: u}}
  template:
    metadata: {labels: {controller-uid: u, batch.kubernetes.io/controller-uid: u, job-name: j}}
    spec: {restartPolicy: Never, containers: [{name: c, image: x}]}
`, func(t *testing.T, out *unstructured.Unstructured) {
			if _, ok := out.Object["spec"].(map[string]interface{})["selector"]; ok {
				t.Error("generated selector kept")
			}
			tl, _, _ := unstructured.NestedStringMap(out.Object, "spec", "template", "metadata", "labels")
			if !reflect.DeepEqual(tl, map[string]string{"job-name": "j"}) {
				t.Errorf("template labels = %v", tl)
			}
			if l := out.GetLabels(); l["controller-uid"] != "" || l["batch.kubernetes.io/controller-uid"] != "" || l["job-name"] != "j" {
				t.Errorf("labels = %v", l)
			}
		}},
		{"job with manual selector", `{apiVersion: batch/v1, kind: Job, metadata: {name: j, namespace: ns}, spec: {manualSelector: true, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}}}}`,
			func(t *testing.T, out *unstructured.Unstructured) {
				if _, ok := out.Object["spec"].(map[string]interface{})["selector"]; !ok {
					t.Error("a manual selector was dropped")
				}
			}},
		{"bound claim", `{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: c, namespace: ns, annotations: {pv.kubernetes.io/bind-completed: "yes", keep: me}}, spec: {volumeName: pv-1, storageClassName: fast}}`,
			func(t *testing.T, out *unstructured.Unstructured) {
				spec := out.Object["spec"].(map[string]interface{})
				if _, ok := spec["volumeName"]; ok || spec["storageClassName"] != "fast" {
					t.Errorf("spec = %v", spec)
				}
				if a := out.GetAnnotations(); a["pv.kubernetes.io/bind-completed"] != "" || a["keep"] != "me" {
					t.Errorf("annotations = %v", a)
				}
			}},
		{"deployment revision", `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: ns, annotations: {deployment.kubernetes.io/revision: "4"}}, spec: {replicas: 2}}`,
			func(t *testing.T, out *unstructured.Unstructured) {
				if _, ok := out.GetAnnotations()["deployment.kubernetes.io/revision"]; ok {
					t.Error("the source's revision annotation was copied")
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := mustObject(t, c.in)
			c.check(t, Transform(in, TargetObject{Location: "east", Namespace: in.GetNamespace(), Source: SourceRef{Cluster: "c", Namespace: in.GetNamespace(), Name: in.GetName()}}))
		})
	}
}

func TestReserved(t *testing.T) {
	for key, want := range map[string]bool{
		"kcp.io/cluster": true, "status.kcp.io/east": true, "kcp.io/location": true, "outcome.kcp.io/east": true,
		"e2e.kcp.io/loc-east": false, "mapper.kcp.io/x": false, "app": false, "example.com/kcp.io": false,
	} {
		if got := reserved(key); got != want {
			t.Errorf("reserved(%q) = %v, want %v", key, got, want)
		}
	}
}
