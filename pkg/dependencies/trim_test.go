package dependencies

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// TestTrim: what Trim keeps of a workload, a Service and an HPA reads the same references,
// selectors and targets as the whole object, and is smaller; other resources pass unchanged.
func TestTrim(t *testing.T) {
	spec := corev1.PodSpec{
		ServiceAccountName: "runner",
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "pull"}},
		InitContainers: []corev1.Container{{Name: "init", Image: "registry.invalid/init:1", Command: []string{"sh", "-c", "true"},
			Env: []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-init"}, Key: "k", Optional: ptr.To(true)}}}}}},
		Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
			Env:     []corev1.EnvVar{{Name: "PLAIN", Value: "x"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "secret-env"}, Key: "k"}}}},
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-envfrom"}}}}}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug",
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "secret-debug"}}}}}}},
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-vol"}}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
	}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"big": "x"}}, Spec: spec}
	meta := metav1.ObjectMeta{Name: "web", Namespace: "ns", Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"kcp.io/assigned-locations": `["a"]`}}
	toU := func(obj runtime.Object) *unstructured.Unstructured {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: m}
	}
	size := func(u *unstructured.Unstructured) int {
		b, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	workloads := map[schema.GroupVersionResource]*unstructured.Unstructured{
		{Group: "apps", Version: "v1", Resource: "deployments"}: toU(&appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: meta,
			Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Template: tmpl, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Status: appsv1.DeploymentStatus{Replicas: 3, Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Message: "ok"}}}}),
		{Group: "batch", Version: "v1", Resource: "cronjobs"}: toU(&batchv1.CronJob{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"}, ObjectMeta: meta,
			Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}),
		{Version: "v1", Resource: "pods"}: toU(&corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: meta, Spec: spec}),
	}
	for gvr, whole := range workloads {
		wholeSize := size(whole)
		want, err := TemplateOf(gvr, whole.Object)
		if err != nil || want == nil {
			t.Fatalf("%s: the whole object's template: %v", gvr.Resource, err)
		}
		trimmedObj, err := Trim(gvr)(whole)
		if err != nil {
			t.Fatal(err)
		}
		trimmed := trimmedObj.(*unstructured.Unstructured)
		got, err := TemplateOf(gvr, trimmed.Object)
		if err != nil || got == nil {
			t.Fatalf("%s: the trimmed object's template: %v", gvr.Resource, err)
		}
		if w, g := refs(SpecReferences(&want.Spec)), refs(SpecReferences(&got.Spec)); w != g || w == "" {
			t.Errorf("%s: trimmed references %q, whole %q", gvr.Resource, g, w)
		}
		if gvr.Resource != "pods" && got.Labels["app"] != "web" {
			t.Errorf("%s: the template's labels were dropped: %v", gvr.Resource, got.Labels)
		}
		if trimmed.GetName() != "web" || trimmed.GetAnnotations()["kcp.io/assigned-locations"] == "" || trimmed.GetKind() == "" {
			t.Errorf("%s: metadata or kind dropped: %v", gvr.Resource, trimmed.Object)
		}
		if s := size(trimmed); s >= wholeSize {
			t.Errorf("%s: trimmed %d bytes, whole %d", gvr.Resource, s, wholeSize)
		}
	}

	svc := toU(&corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: meta,
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}})
	hpa := obj("HorizontalPodAutoscaler", "web", map[string]interface{}{"scaleTargetRef": map[string]interface{}{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": int64(3)})
	trimmedSvc, _ := Trim(ServicesV1)(svc)
	trimmedHPA, _ := Trim(HorizontalPodAutoscalersV2)(hpa)
	s := NewSelectors([]*unstructured.Unstructured{trimmedSvc.(*unstructured.Unstructured)}, []*unstructured.Unstructured{trimmedHPA.(*unstructured.Unstructured)}, nil)
	if got := refs(s.References(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", map[string]string{"app": "web"})); got != "horizontalpodautoscalers.autoscaling/web services/web" {
		t.Errorf("trimmed Service and HPA: %q", got)
	}
	if _, found, _ := unstructured.NestedSlice(trimmedSvc.(*unstructured.Unstructured).Object, "spec", "ports"); found {
		t.Errorf("the Service's ports were kept")
	}

	cm := obj("ConfigMap", "cm", nil)
	if out, _ := Trim(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})(cm); out != cm {
		t.Errorf("a ConfigMap was changed")
	}
}
