package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
)

// Names of the test data (docs/design.md, "Names").
const (
	assignedAnnotation = "kcp.io/assigned-locations"
	// locationLabelPrefix marks each assigned location with a label too, so kube-apiserver's
	// label-selector list is the ground truth of every view (docs/design.md, "Testing notes").
	locationLabelPrefix = "e2e.kcp.io/loc-"
)

var (
	configMapsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	widgetsGVR     = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	gadgetsGVR     = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	crdGVR         = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// setAssignment writes the assignment annotation and the twin labels of locations onto obj.
func setAssignment(obj *unstructured.Unstructured, locations ...string) {
	labels := obj.GetLabels()
	for k := range labels {
		if strings.HasPrefix(k, locationLabelPrefix) {
			delete(labels, k)
		}
	}
	if labels == nil {
		labels = map[string]string{}
	}
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if len(locations) == 0 {
		delete(ann, assignedAnnotation)
	} else {
		b, _ := json.Marshal(locations)
		ann[assignedAnnotation] = string(b)
		for _, l := range locations {
			labels[locationLabelPrefix+l] = ""
		}
	}
	obj.SetLabels(labels)
	obj.SetAnnotations(ann)
}

// setMalformed writes an annotation value that does not parse and no twin labels.
func setMalformed(obj *unstructured.Unstructured, value string) {
	setAssignment(obj)
	ann := obj.GetAnnotations()
	ann[assignedAnnotation] = value
	obj.SetAnnotations(ann)
}

func newConfigMap(ns, name string, locations ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
		"data":     map[string]interface{}{"key": "value-" + name},
	}}
	setAssignment(u, locations...)
	return u
}

func newDeployment(ns, name string, locations ...string) *unstructured.Unstructured {
	labels := map[string]interface{}{"app": name}
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
		"spec": map[string]interface{}{
			"replicas": int64(1),
			"selector": map[string]interface{}{"matchLabels": labels},
			"template": map[string]interface{}{
				"metadata": map[string]interface{}{"labels": labels},
				"spec": map[string]interface{}{"containers": []interface{}{
					map[string]interface{}{"name": "app", "image": "registry.invalid/app:1"},
				}},
			},
		},
	}}
	setAssignment(u, locations...)
	return u
}

func newWidget(gvr schema.GroupVersionResource, kind, ns, name string, locations ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
		"spec":     map[string]interface{}{"size": int64(len(name))},
	}}
	setAssignment(u, locations...)
	return u
}

// crd returns a namespaced CRD of group example.com, version v1, with a status subresource.
func crd(plural, kind string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]interface{}{"name": plural + ".example.com"},
		"spec": map[string]interface{}{
			"group": "example.com",
			"scope": "Namespaced",
			"names": map[string]interface{}{"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": []interface{}{map[string]interface{}{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]interface{}{"status": map[string]interface{}{}},
				"additionalPrinterColumns": []interface{}{
					map[string]interface{}{"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
					map[string]interface{}{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
				},
				"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
}

// createCRD creates the CRD of crd(plural, kind) and waits until dyn serves it.
func createCRD(t *testing.T, ctx context.Context, dyn dynamic.Interface, plural, kind string) {
	t.Helper()
	createCRDIn(t, ctx, dyn, "example.com", plural, kind)
}

// randomLocations picks 0 to all of locations (about a quarter of objects get none).
func randomLocations(r *rand.Rand, locations []string) []string {
	var out []string
	for _, l := range locations {
		if r.Intn(2) == 0 {
			out = append(out, l)
		}
	}
	return out
}

// ensureNamespace creates ns in the source if it does not exist.
func ensureNamespace(t *testing.T, ctx context.Context, dyn dynamic.Interface, ns string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]interface{}{"name": ns}}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
}

// groundTruth lists, from the source kube-apiserver with the twin label selector, the
// namespace/name keys of gvr assigned to location (in namespace ns, or all when empty).
func groundTruth(t *testing.T, ctx context.Context, source dynamic.Interface, gvr schema.GroupVersionResource, location, ns string) sets.Set[string] {
	t.Helper()
	list, err := source.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: locationLabelPrefix + location})
	if err != nil {
		t.Fatalf("listing ground truth of %s for %s: %v", gvr.Resource, location, err)
	}
	return keysOf(list.Items)
}

// viewKeys lists gvr through a view (in namespace ns, or all when empty).
func viewKeys(t *testing.T, ctx context.Context, view dynamic.Interface, gvr schema.GroupVersionResource, ns string) sets.Set[string] {
	t.Helper()
	list, err := view.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing %s through the view: %v", gvr.Resource, err)
	}
	return keysOf(list.Items)
}

func keysOf(items []unstructured.Unstructured) sets.Set[string] {
	out := sets.New[string]()
	for _, i := range items {
		out.Insert(i.GetNamespace() + "/" + i.GetName())
	}
	return out
}

// diff describes how got differs from want, for test failures.
func diff(want, got sets.Set[string]) string {
	missing, extra := sets.List(want.Difference(got)), sets.List(got.Difference(want))
	sort.Strings(missing)
	return fmt.Sprintf("missing %d %v, unexpected %d %v", len(missing), head(missing), len(extra), head(extra))
}

func head(s []string) []string {
	if len(s) > 10 {
		return s[:10]
	}
	return s
}
