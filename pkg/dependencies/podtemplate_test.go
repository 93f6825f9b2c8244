package dependencies

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// refs formats references as "resource/name" (with "?" for an optional one), in order.
func refs(rs []Reference) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
		if r.Optional {
			out[i] += "?"
		}
	}
	return strings.Join(out, " ")
}

// TestSpecReferences is a table over every field of a Pod spec that references an object of
// its namespace, in each container list.
func TestSpecReferences(t *testing.T) {
	cmKey := func(name string, optional bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k", Optional: ptr.To(optional)}}
	}
	secretKey := func(name string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}
	}
	envFrom := []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-envfrom"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "secret-envfrom"}, Optional: ptr.To(true)}},
	}
	ref := func(name string) *corev1.LocalObjectReference { return &corev1.LocalObjectReference{Name: name} }
	vol := func(src corev1.VolumeSource) corev1.PodSpec {
		return corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: src}}}
	}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want string
	}{
		{"nothing; the default ServiceAccount", corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{Name: "c"}}}, ""},
		{"serviceAccountName", corev1.PodSpec{ServiceAccountName: "runner"}, "serviceaccounts/runner"},
		{"deprecated serviceAccount", corev1.PodSpec{DeprecatedServiceAccount: "old"}, "serviceaccounts/old"},
		{"imagePullSecrets", corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}}}, "secrets/pull"},
		{"container env and envFrom", corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Env:     []corev1.EnvVar{{Name: "A", ValueFrom: cmKey("cm-env", false)}, {Name: "B", ValueFrom: secretKey("secret-env")}, {Name: "C", Value: "plain"}},
			EnvFrom: envFrom}}},
			"configmaps/cm-env configmaps/cm-envfrom secrets/secret-env secrets/secret-envfrom?"},
		{"init container env", corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i", Env: []corev1.EnvVar{{Name: "A", ValueFrom: cmKey("cm-init", true)}}}}},
			"configmaps/cm-init?"},
		{"init container envFrom", corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i", EnvFrom: envFrom}}},
			"configmaps/cm-envfrom secrets/secret-envfrom?"},
		{"ephemeral container env and envFrom", corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Env: []corev1.EnvVar{{Name: "A", ValueFrom: secretKey("secret-debug")}}, EnvFrom: envFrom}}}},
			"configmaps/cm-envfrom secrets/secret-debug secrets/secret-envfrom?"},
		{"required wins over optional", corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "i", Env: []corev1.EnvVar{{Name: "A", ValueFrom: cmKey("shared", true)}}}},
			Containers:     []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "A", ValueFrom: cmKey("shared", false)}}}}},
			"configmaps/shared"},
		{"configMap volume", vol(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-vol"}}}), "configmaps/cm-vol"},
		{"optional secret volume", vol(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "secret-vol", Optional: ptr.To(true)}}), "secrets/secret-vol?"},
		{"projected sources", vol(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-proj"}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "secret-proj"}}},
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			{DownwardAPI: &corev1.DownwardAPIProjection{}},
		}}}), "configmaps/cm-proj secrets/secret-proj"},
		{"persistentVolumeClaim volume", vol(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}), "persistentvolumeclaims/data"},
		{"ephemeral volume: its claim is made on the target", vol(corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}), ""},
		{"azureFile", vol(corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{SecretName: "s-azure"}}), "secrets/s-azure"},
		{"cephfs", vol(corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{SecretRef: ref("s-ceph")}}), "secrets/s-ceph"},
		{"cinder", vol(corev1.VolumeSource{Cinder: &corev1.CinderVolumeSource{SecretRef: ref("s-cinder")}}), "secrets/s-cinder"},
		{"csi", vol(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: ref("s-csi")}}), "secrets/s-csi"},
		{"flexVolume", vol(corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "d", SecretRef: ref("s-flex")}}), "secrets/s-flex"},
		{"iscsi", vol(corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{SecretRef: ref("s-iscsi")}}), "secrets/s-iscsi"},
		{"rbd", vol(corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{SecretRef: ref("s-rbd")}}), "secrets/s-rbd"},
		{"scaleIO", vol(corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{SecretRef: ref("s-scaleio")}}), "secrets/s-scaleio"},
		{"storageos", vol(corev1.VolumeSource{StorageOS: &corev1.StorageOSVolumeSource{SecretRef: ref("s-storageos")}}), "secrets/s-storageos"},
		{"an emptyDir references nothing", vol(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}), ""},
	} {
		if got := refs(SpecReferences(&tc.spec)); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestTemplateOf reads the Pod template of every kind that holds one, at its own path.
func TestTemplateOf(t *testing.T) {
	spec := map[string]interface{}{"serviceAccountName": "runner", "containers": []interface{}{map[string]interface{}{"name": "c", "image": "i"}}}
	template := map[string]interface{}{"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": "web"}}, "spec": spec}
	objects := map[string]map[string]interface{}{
		"pods":         {"metadata": map[string]interface{}{"name": "p", "labels": map[string]interface{}{"app": "web"}}, "spec": spec},
		"deployments":  {"spec": map[string]interface{}{"template": template}},
		"replicasets":  {"spec": map[string]interface{}{"template": template}},
		"statefulsets": {"spec": map[string]interface{}{"template": template}},
		"daemonsets":   {"spec": map[string]interface{}{"template": template}},
		"jobs":         {"spec": map[string]interface{}{"template": template}},
		"cronjobs":     {"spec": map[string]interface{}{"jobTemplate": map[string]interface{}{"spec": map[string]interface{}{"template": template}}}},
	}
	if n := len(TemplateResources()); n != len(objects) {
		t.Fatalf("%d template resources, the table has %d", n, len(objects))
	}
	for _, gvr := range TemplateResources() {
		pt, err := TemplateOf(gvr, runtime.DeepCopyJSON(objects[gvr.Resource]))
		if err != nil || pt == nil {
			t.Errorf("%s: %v, %v", gvr, pt, err)
			continue
		}
		if got := fmt.Sprint(pt.Labels, " ", refs(SpecReferences(&pt.Spec))); got != "map[app:web] serviceaccounts/runner" {
			t.Errorf("%s: %s", gvr, got)
		}
		if !HoldsTemplate(gvr.GroupResource()) {
			t.Errorf("HoldsTemplate(%s) is false", gvr.GroupResource())
		}
	}
	if pt, err := TemplateOf(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, map[string]interface{}{}); pt != nil || err != nil {
		t.Errorf("a ConfigMap has a template: %v %v", pt, err)
	}
	if pt, err := TemplateOf(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, map[string]interface{}{"spec": map[string]interface{}{}}); pt != nil || err != nil {
		t.Errorf("a Deployment without a template: %v %v", pt, err)
	}
	bad := map[string]interface{}{"spec": map[string]interface{}{"template": map[string]interface{}{"spec": map[string]interface{}{"containers": "not a list"}}}}
	if _, err := TemplateOf(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, bad); err == nil || !strings.Contains(err.Error(), "spec.template.spec") {
		t.Errorf("a malformed template: %v", err)
	}
}
