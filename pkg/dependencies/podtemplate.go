package dependencies

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// templatePaths are the resources whose objects hold a Pod template, with the path of the
// template (nil: the object is a Pod, its own metadata and spec are the template), at the
// version TemplateResources names.
var templatePaths = map[schema.GroupVersionResource][]string{
	{Version: "v1", Resource: "pods"}:                        {},
	{Group: "apps", Version: "v1", Resource: "deployments"}:  {"spec", "template"},
	{Group: "apps", Version: "v1", Resource: "replicasets"}:  {"spec", "template"},
	{Group: "apps", Version: "v1", Resource: "statefulsets"}: {"spec", "template"},
	{Group: "apps", Version: "v1", Resource: "daemonsets"}:   {"spec", "template"},
	{Group: "batch", Version: "v1", Resource: "jobs"}:        {"spec", "template"},
	{Group: "batch", Version: "v1", Resource: "cronjobs"}:    {"spec", "jobTemplate", "spec", "template"},
}

// TemplateResources returns the resources whose objects hold a Pod template (Pod, Deployment,
// ReplicaSet, StatefulSet, DaemonSet, Job, CronJob), at their v1 versions, sorted.
func TemplateResources() []schema.GroupVersionResource {
	out := make([]schema.GroupVersionResource, 0, len(templatePaths))
	for gvr := range templatePaths {
		out = append(out, gvr)
	}
	sortGVRs(out)
	return out
}

// HoldsTemplate reports whether the objects of gr hold a Pod template.
func HoldsTemplate(gr schema.GroupResource) bool {
	for gvr := range templatePaths {
		if gvr.GroupResource() == gr {
			return true
		}
	}
	return false
}

// PodTemplate is the Pod template of a workload: the labels its Pods get and their spec.
type PodTemplate struct {
	// Labels are the template's metadata.labels (a Pod's own labels).
	Labels map[string]string
	// Spec is the Pod spec.
	Spec corev1.PodSpec
}

// TemplateOf returns the Pod template of obj, an object of gvr as JSON (an unstructured
// object's content), or nil when gvr holds none (TemplateResources) or obj has none. It
// fails when the template does not decode as a Pod template of core/v1.
func TemplateOf(gvr schema.GroupVersionResource, obj map[string]interface{}) (*PodTemplate, error) {
	path, ok := templatePaths[gvr]
	if !ok {
		return nil, nil
	}
	tmpl := obj
	if len(path) > 0 {
		m, found, err := unstructured.NestedMap(obj, path...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(path, "."), err)
		}
		if !found {
			return nil, nil
		}
		tmpl = m
	}
	var pt corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]interface{}{"metadata": tmpl["metadata"], "spec": tmpl["spec"]}, &pt); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(append(path, "spec"), "."), err)
	}
	return &PodTemplate{Labels: pt.Labels, Spec: pt.Spec}, nil
}

// SpecReferences returns what a Pod spec references in its namespace, sorted by resource and
// name:
//   - ConfigMaps: configMap volumes, projected volumes' configMap sources, and in every
//     container (init, regular and ephemeral) env[].valueFrom.configMapKeyRef and
//     envFrom[].configMapRef;
//   - Secrets: secret volumes, projected volumes' secret sources, the secretRefs of other
//     volume plugins (azureFile, cephfs, cinder, csi's nodePublishSecretRef, flexVolume,
//     iscsi, rbd, scaleIO, storageos), imagePullSecrets, and in every container
//     env[].valueFrom.secretKeyRef and envFrom[].secretRef (the fields kube-apiserver's
//     podutil.VisitPodSecretNames and VisitPodConfigmapNames visit);
//   - the ServiceAccount (serviceAccountName, or the deprecated serviceAccount), unless it is
//     "default", which every namespace of every cluster has of its own;
//   - PersistentVolumeClaims named by persistentVolumeClaim volumes (ephemeral volumes' claims
//     are made on the target).
//
// A ConfigMap or Secret is optional when every mention marks it optional.
func SpecReferences(spec *corev1.PodSpec) []Reference {
	var c collector
	optional := func(b *bool) bool { return b != nil && *b }
	for _, s := range spec.ImagePullSecrets {
		c.add(Secrets, s.Name, false)
	}
	containers := func(add func(env []corev1.EnvVar, envFrom []corev1.EnvFromSource)) {
		for i := range spec.InitContainers {
			add(spec.InitContainers[i].Env, spec.InitContainers[i].EnvFrom)
		}
		for i := range spec.Containers {
			add(spec.Containers[i].Env, spec.Containers[i].EnvFrom)
		}
		for i := range spec.EphemeralContainers {
			add(spec.EphemeralContainers[i].Env, spec.EphemeralContainers[i].EnvFrom)
		}
	}
	containers(func(env []corev1.EnvVar, envFrom []corev1.EnvFromSource) {
		for _, e := range envFrom {
			if e.ConfigMapRef != nil {
				c.add(ConfigMaps, e.ConfigMapRef.Name, optional(e.ConfigMapRef.Optional))
			}
			if e.SecretRef != nil {
				c.add(Secrets, e.SecretRef.Name, optional(e.SecretRef.Optional))
			}
		}
		for _, e := range env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				c.add(ConfigMaps, r.Name, optional(r.Optional))
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				c.add(Secrets, r.Name, optional(r.Optional))
			}
		}
	})
	secretRef := func(r *corev1.LocalObjectReference) {
		if r != nil {
			c.add(Secrets, r.Name, false)
		}
	}
	for _, v := range spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			c.add(ConfigMaps, v.ConfigMap.Name, optional(v.ConfigMap.Optional))
		case v.Secret != nil:
			c.add(Secrets, v.Secret.SecretName, optional(v.Secret.Optional))
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					c.add(ConfigMaps, src.ConfigMap.Name, optional(src.ConfigMap.Optional))
				}
				if src.Secret != nil {
					c.add(Secrets, src.Secret.Name, optional(src.Secret.Optional))
				}
			}
		case v.PersistentVolumeClaim != nil:
			c.add(PersistentVolumeClaims, v.PersistentVolumeClaim.ClaimName, false)
		case v.AzureFile != nil:
			c.add(Secrets, v.AzureFile.SecretName, false)
		case v.CephFS != nil:
			secretRef(v.CephFS.SecretRef)
		case v.Cinder != nil:
			secretRef(v.Cinder.SecretRef)
		case v.CSI != nil:
			secretRef(v.CSI.NodePublishSecretRef)
		case v.FlexVolume != nil:
			secretRef(v.FlexVolume.SecretRef)
		case v.ISCSI != nil:
			secretRef(v.ISCSI.SecretRef)
		case v.RBD != nil:
			secretRef(v.RBD.SecretRef)
		case v.ScaleIO != nil:
			secretRef(v.ScaleIO.SecretRef)
		case v.StorageOS != nil:
			secretRef(v.StorageOS.SecretRef)
		}
	}
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = spec.DeprecatedServiceAccount
	}
	if sa != "default" {
		c.add(ServiceAccounts, sa, false)
	}
	return c.list()
}
