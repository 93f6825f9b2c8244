package dependencies

import (
	"fmt"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// benchDeployment is a Deployment of bench scenario 10 as kube-apiserver serves it (its
// defaults filled in) once placed, with the managedFields entry the informers keep
// (managedfields.Keep): %[1]d numbers the object.
const benchDeployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"app-%05[1]d","namespace":"placed-000",
"uid":"6f1c1f5e-0000-4000-8000-%012[1]d","resourceVersion":"%[1]d","generation":1,"creationTimestamp":"2026-11-28T23:30:00Z",
"labels":{"app":"app-%05[1]d"},"annotations":{"deployment.kubernetes.io/revision":"1","kcp.io/assigned-locations":"[\"l0283\",\"l0761\"]",
"control.mapper.kcp.io/placement":"spread"},
"managedFields":[{"manager":"mapper-controller-placement","operation":"Apply","apiVersion":"apps/v1","time":"2026-11-28T23:31:00Z",
"fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{"f:control.mapper.kcp.io/placement":{},"f:kcp.io/assigned-locations":{}}}}}]},
"spec":{"replicas":1,"selector":{"matchLabels":{"app":"app-%05[1]d"}},"template":{"metadata":{"creationTimestamp":null,"labels":{"app":"app-%05[1]d"}},
"spec":{"volumes":[{"name":"config","configMap":{"name":"app-%05[1]d-1","defaultMode":420}}],
"containers":[{"name":"app","image":"registry.invalid/app:1","envFrom":[{"secretRef":{"name":"app-%05[1]d-2"}}],"resources":{},
"volumeMounts":[{"name":"config","mountPath":"/config"}],"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File",
"imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",
"serviceAccountName":"app-%05[1]d-3","serviceAccount":"app-%05[1]d-3","securityContext":{},"schedulerName":"default-scheduler"}},
"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"25%%","maxSurge":"25%%"}},"revisionHistoryLimit":10,
"progressDeadlineSeconds":600},"status":{}}`

// benchService is a Service of bench scenario 10 as kube-apiserver serves it.
const benchService = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"app-%05[1]d","namespace":"placed-000",
"uid":"6f1c1f5e-0000-4000-9000-%012[1]d","resourceVersion":"%[1]d","creationTimestamp":"2026-11-28T23:30:00Z",
"annotations":{"kcp.io/assigned-locations":"[\"l0283\",\"l0761\"]","control.mapper.kcp.io/dependency-locations":"[\"l0283\",\"l0761\"]"},
"managedFields":[{"manager":"mapper-controller-dependencies","operation":"Apply","apiVersion":"v1","time":"2026-11-28T23:31:00Z",
"fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{"f:control.mapper.kcp.io/dependency-locations":{},"f:kcp.io/assigned-locations":{}}}}}]},
"spec":{"ports":[{"protocol":"TCP","port":80,"targetPort":80}],"selector":{"app":"app-%05[1]d"},"clusterIP":"None","clusterIPs":["None"],
"type":"ClusterIP","sessionAffinity":"None","ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack","internalTrafficPolicy":"Cluster"},
"status":{"loadBalancer":{}}}`

// BenchmarkTrimRetained measures what an informer keeps of 10,000 Deployments and 10,000
// Services of bench scenario 10, decoded as a dynamic informer decodes them, whole and
// through Trim: the heap the objects retain after a garbage collection, per object
// (retained-B/object), and the cost of the transform (ns/op, B/op: one object).
func BenchmarkTrimRetained(b *testing.B) {
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	for _, tc := range []struct {
		name string
		gvr  schema.GroupVersionResource
		json string
	}{{"Deployment", deployments, benchDeployment}, {"Service", ServicesV1, benchService}} {
		for _, trimmed := range []bool{false, true} {
			name := tc.name + "/whole"
			if trimmed {
				name = tc.name + "/trimmed"
			}
			b.Run(name, func(b *testing.B) {
				const n = 10000
				trim := Trim(tc.gvr)
				decode := func(i int) *unstructured.Unstructured {
					u := &unstructured.Unstructured{}
					if err := u.UnmarshalJSON(fmt.Appendf(nil, tc.json, i)); err != nil {
						b.Fatal(err)
					}
					if trimmed {
						out, _ := trim(u)
						u = out.(*unstructured.Unstructured)
					}
					return u
				}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				kept := make([]*unstructured.Unstructured, n)
				for i := range kept {
					kept[i] = decode(i)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				runtime.KeepAlive(kept)
				retained := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					_ = decode(i)
				}
				// After the loop: ResetTimer drops the metrics reported before it.
				b.ReportMetric(retained, "retained-B/object")
			})
		}
	}
}
