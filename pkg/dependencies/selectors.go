package dependencies

import (
	"slices"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The resources whose objects select or target workloads, at the versions Selectors reads.
var (
	ServicesV1                 = Services.WithVersion("v1")
	HorizontalPodAutoscalersV2 = HorizontalPodAutoscalers.WithVersion("v2")
	PodDisruptionBudgetsV1     = PodDisruptionBudgets.WithVersion("v1")
)

// Selectors are the objects of one namespace that select or target workloads: Services (by
// spec.selector), HorizontalPodAutoscalers (by spec.scaleTargetRef) and PodDisruptionBudgets
// (by spec.selector), parsed once for all the workloads of the namespace.
type Selectors struct {
	services []selecting
	hpas     []targeting
	pdbs     []selecting
}

// selecting is an object whose label selector selects Pods.
type selecting struct {
	name     string
	selector labels.Selector
}

// targeting is an object that targets one workload by kind and name.
type targeting struct {
	name   string
	target schema.GroupKind
	object string
}

// NewSelectors parses services (core/v1), hpas (autoscaling/v2) and pdbs (policy/v1), objects
// as JSON. An object that does not decode, a Service without a selector (it selects nothing:
// its endpoints are managed by hand) and a PodDisruptionBudget without one are left out; a
// PodDisruptionBudget whose selector is empty selects every Pod of the namespace, as
// policy/v1 says.
func NewSelectors(services, hpas, pdbs []*unstructured.Unstructured) *Selectors {
	s := &Selectors{}
	for _, u := range services {
		var svc corev1.Service
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc) != nil || len(svc.Spec.Selector) == 0 {
			continue
		}
		s.services = append(s.services, selecting{u.GetName(), labels.SelectorFromValidatedSet(svc.Spec.Selector)})
	}
	for _, u := range hpas {
		var hpa autoscalingv2.HorizontalPodAutoscaler
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &hpa) != nil {
			continue
		}
		ref := hpa.Spec.ScaleTargetRef
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || ref.Name == "" {
			continue
		}
		s.hpas = append(s.hpas, targeting{u.GetName(), schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, ref.Name})
	}
	for _, u := range pdbs {
		var pdb policyv1.PodDisruptionBudget
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pdb) != nil || pdb.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue
		}
		s.pdbs = append(s.pdbs, selecting{u.GetName(), sel})
	}
	return s
}

// References returns the Services and PodDisruptionBudgets whose selectors select Pods with
// templateLabels, and the HorizontalPodAutoscalers that target the workload of kind and name,
// sorted by resource and name. A workload without template labels is selected by none.
func (s *Selectors) References(kind schema.GroupKind, name string, templateLabels map[string]string) []Reference {
	var c collector
	set := labels.Set(templateLabels)
	if len(set) > 0 {
		for _, svc := range s.services {
			if svc.selector.Matches(set) {
				c.add(Services, svc.name, false)
			}
		}
		for _, pdb := range s.pdbs {
			if pdb.selector.Matches(set) {
				c.add(PodDisruptionBudgets, pdb.name, false)
			}
		}
	}
	for _, hpa := range s.hpas {
		if hpa.target == kind && hpa.object == name {
			c.add(HorizontalPodAutoscalers, hpa.name, false)
		}
	}
	return c.list()
}

// sortGVRs sorts gvrs by group, resource and version.
func sortGVRs(gvrs []schema.GroupVersionResource) {
	slices.SortFunc(gvrs, func(a, b schema.GroupVersionResource) int {
		return strings.Compare(a.Group+"/"+a.Resource+"/"+a.Version, b.Group+"/"+b.Resource+"/"+b.Version)
	})
}
