package dependencies

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Trim returns an informer transform (k8s.io/client-go/tools/cache.TransformFunc) for the
// objects of gvr that keeps, of an *unstructured.Unstructured, its apiVersion, kind and
// metadata and only the fields this package reads of the rest:
//   - a Pod template (TemplateResources; at the template's path): its metadata.labels and, of
//     its spec, serviceAccountName, serviceAccount, imagePullSecrets, volumes, and of every
//     container (init, regular, ephemeral) its name, envFrom and the env entries with a
//     valueFrom (SpecReferences);
//   - a Service's or PodDisruptionBudget's spec.selector, a HorizontalPodAutoscaler's
//     spec.scaleTargetRef (Selectors).
//
// Everything else (status, images, commands, probes, resources, a Service's ports) is
// dropped. Objects of other resources, and values that are not *unstructured.Unstructured,
// are returned as they are. The transform never fails; a malformed field is kept as it is, so
// that reading it fails as it would have on the whole object. The trimmed objects are meant
// for an informer of the dependency controller alone: nothing may write them back, and a
// DependencyRule's expression needs the whole object.
func Trim(gvr schema.GroupVersionResource) func(interface{}) (interface{}, error) {
	path, template := templatePaths[gvr]
	var keep string // the spec field Selectors reads
	switch gvr {
	case ServicesV1, PodDisruptionBudgetsV1:
		keep = "selector"
	case HorizontalPodAutoscalersV2:
		keep = "scaleTargetRef"
	}
	return func(obj interface{}) (interface{}, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || (!template && keep == "") {
			return obj, nil
		}
		out := map[string]interface{}{}
		for _, k := range []string{"apiVersion", "kind", "metadata"} {
			if v, ok := u.Object[k]; ok {
				out[k] = v
			}
		}
		if keep != "" {
			if spec, ok := u.Object["spec"].(map[string]interface{}); ok {
				trimmed := map[string]interface{}{}
				if v, ok := spec[keep]; ok {
					trimmed[keep] = v
				}
				out["spec"] = trimmed
			}
			return &unstructured.Unstructured{Object: out}, nil
		}
		if len(path) == 0 {
			// A Pod: its own metadata and spec are the template.
			if spec, ok := u.Object["spec"].(map[string]interface{}); ok {
				out["spec"] = trimPodSpec(spec)
			}
			return &unstructured.Unstructured{Object: out}, nil
		}
		v, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
		tmpl, isMap := v.(map[string]interface{})
		if err != nil || !found || !isMap {
			// Kept as it is: TemplateOf reports the malformed template, or finds none.
			if v, ok := u.Object[path[0]]; ok {
				out[path[0]] = v
			}
			return &unstructured.Unstructured{Object: out}, nil
		}
		trimmed := map[string]interface{}{}
		if m, ok := tmpl["metadata"].(map[string]interface{}); ok {
			if labels, ok := m["labels"]; ok {
				trimmed["metadata"] = map[string]interface{}{"labels": labels}
			}
		} else if m, ok := tmpl["metadata"]; ok {
			trimmed["metadata"] = m
		}
		if spec, ok := tmpl["spec"].(map[string]interface{}); ok {
			trimmed["spec"] = trimPodSpec(spec)
		} else if spec, ok := tmpl["spec"]; ok {
			trimmed["spec"] = spec
		}
		// The maps along the path hold only the next one (the whole object is dropped, so the
		// kept values are not copied).
		at := out
		for _, k := range path[:len(path)-1] {
			next := map[string]interface{}{}
			at[k] = next
			at = next
		}
		at[path[len(path)-1]] = trimmed
		return &unstructured.Unstructured{Object: out}, nil
	}
}

// podSpecFields are the Pod spec's fields SpecReferences reads besides the containers.
var podSpecFields = []string{"serviceAccountName", "serviceAccount", "imagePullSecrets", "volumes"}

// trimPodSpec returns the fields of a Pod spec (as JSON) that SpecReferences reads.
func trimPodSpec(spec map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for _, k := range podSpecFields {
		if v, ok := spec[k]; ok {
			out[k] = v
		}
	}
	for _, k := range []string{"initContainers", "containers", "ephemeralContainers"} {
		list, ok := spec[k].([]interface{})
		if !ok {
			if v, found := spec[k]; found {
				out[k] = v // malformed: kept for the decoder to report
			}
			continue
		}
		trimmed := make([]interface{}, 0, len(list))
		for _, item := range list {
			c, ok := item.(map[string]interface{})
			if !ok {
				trimmed = append(trimmed, item)
				continue
			}
			tc := map[string]interface{}{}
			for _, f := range []string{"name", "envFrom"} {
				if v, ok := c[f]; ok {
					tc[f] = v
				}
			}
			if env, ok := c["env"].([]interface{}); ok {
				var refs []interface{}
				for _, e := range env {
					if m, ok := e.(map[string]interface{}); !ok || m["valueFrom"] != nil {
						refs = append(refs, e)
					}
				}
				if len(refs) > 0 {
					tc["env"] = refs
				}
			} else if v, ok := c["env"]; ok {
				tc["env"] = v
			}
			trimmed = append(trimmed, tc)
		}
		out[k] = trimmed
	}
	return out
}
