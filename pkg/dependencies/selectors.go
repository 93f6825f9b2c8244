package dependencies

import (
	"slices"
	"strings"
	"sync"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
	return (*SelectorCache)(nil).Selectors(services, hpas, pdbs)
}

// SelectorCache keeps what NewSelectors parses of each object, by uid and resourceVersion:
// the dependency controller reads the selectors of a namespace in each of its rounds, and
// converting every Service of the namespace each time cost more than matching them. A nil
// *SelectorCache keeps nothing. Safe for concurrent use.
type SelectorCache struct {
	mu     sync.Mutex
	parsed map[types.UID]parsedSelector
}

// parsedSelector is one object parsed at one resourceVersion: at most one of sel and tgt is
// set (neither when the object selects nothing).
type parsedSelector struct {
	resourceVersion string
	sel             *selecting
	tgt             *targeting
}

// NewSelectorCache returns an empty SelectorCache.
func NewSelectorCache() *SelectorCache {
	return &SelectorCache{parsed: map[types.UID]parsedSelector{}}
}

// Selectors is NewSelectors, with each object parsed once per resourceVersion.
func (c *SelectorCache) Selectors(services, hpas, pdbs []*unstructured.Unstructured) *Selectors {
	s := &Selectors{}
	for _, u := range services {
		if p := c.parse(u, parseService); p.sel != nil {
			s.services = append(s.services, *p.sel)
		}
	}
	for _, u := range hpas {
		if p := c.parse(u, parseHPA); p.tgt != nil {
			s.hpas = append(s.hpas, *p.tgt)
		}
	}
	for _, u := range pdbs {
		if p := c.parse(u, parsePDB); p.sel != nil {
			s.pdbs = append(s.pdbs, *p.sel)
		}
	}
	return s
}

// Forget drops what the cache keeps of the object uid (it was deleted).
func (c *SelectorCache) Forget(uid types.UID) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.parsed, uid)
	c.mu.Unlock()
}

// parse returns u parsed by parse, from the cache when it holds u's resourceVersion.
func (c *SelectorCache) parse(u *unstructured.Unstructured, parse func(*unstructured.Unstructured) parsedSelector) parsedSelector {
	if c == nil {
		return parse(u)
	}
	c.mu.Lock()
	p, ok := c.parsed[u.GetUID()]
	c.mu.Unlock()
	if ok && p.resourceVersion == u.GetResourceVersion() {
		return p
	}
	p = parse(u)
	p.resourceVersion = u.GetResourceVersion()
	c.mu.Lock()
	c.parsed[u.GetUID()] = p
	c.mu.Unlock()
	return p
}

// parseService parses a Service's spec.selector; none without one.
func parseService(u *unstructured.Unstructured) parsedSelector {
	var svc corev1.Service
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc) != nil || len(svc.Spec.Selector) == 0 {
		return parsedSelector{}
	}
	return parsedSelector{sel: &selecting{u.GetName(), labels.SelectorFromValidatedSet(svc.Spec.Selector)}}
}

// parseHPA parses a HorizontalPodAutoscaler's spec.scaleTargetRef.
func parseHPA(u *unstructured.Unstructured) parsedSelector {
	var hpa autoscalingv2.HorizontalPodAutoscaler
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &hpa) != nil {
		return parsedSelector{}
	}
	ref := hpa.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ref.Name == "" {
		return parsedSelector{}
	}
	return parsedSelector{tgt: &targeting{u.GetName(), schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, ref.Name}}
}

// parsePDB parses a PodDisruptionBudget's spec.selector; none without one.
func parsePDB(u *unstructured.Unstructured) parsedSelector {
	var pdb policyv1.PodDisruptionBudget
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pdb) != nil || pdb.Spec.Selector == nil {
		return parsedSelector{}
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return parsedSelector{}
	}
	return parsedSelector{sel: &selecting{u.GetName(), sel}}
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
