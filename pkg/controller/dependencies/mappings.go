package dependencies

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/served"
	"github.com/cluster-mapper/cluster-mapper/pkg/dependencies"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
)

// MappingResource is the GroupVersionResource of ResourceMappings: their entries of origin
// Source of spec.related make related objects follow the objects of spec.source
// (docs/resourcemapping.md, "Related objects: origin Source").
var MappingResource = mapper.MappingResource

// mappingFailureKey is the key of a ResourceMapping's evaluation failures among the rules'
// (recordRuleFailures): "resourcemappings/<name>" (a DependencyRule's name has no slash).
func mappingFailureKey(name string) string { return MappingResource.Resource + "/" + name }

// relatedState is one entry of origin Source of a ResourceMapping as a round uses it.
type relatedState struct {
	mapping *controlv1alpha1.ResourceMapping
	// related is the compiled entry; nil when the mapping does not compile.
	related *dependencies.Related
	// within are the locations the mapping is assigned to: the related objects follow the
	// main object only there.
	within sets.Set[string]
}

// memoKey is the key of the entry's results in a memoEntry: "<mapping>/<identifier>".
func (rs *relatedState) memoKey() string { return rs.mapping.Name + "/" + rs.related.Identifier }

// mappingState is one ResourceMapping with entries of origin Source, as a round uses it.
type mappingState struct {
	obj *controlv1alpha1.ResourceMapping
	gvr schema.GroupVersionResource
	// entries are its entries of origin Source; with compileErr, one entry without a compiled
	// Related stands for them all (its objects' related objects are unknown).
	entries    []*relatedState
	compileErr error
	// informer holds the objects of gvr (whole objects), when served.
	informer toolscache.SharedIndexInformer
}

// compiledMapping are the entries of origin Source of a mapping, compiled at one uid and
// generation.
type compiledMapping struct {
	uid        types.UID
	generation int64
	related    []*dependencies.Related
	err        error
}

// mappingOf converts an informer object into a ResourceMapping.
func mappingOf(obj interface{}) (*controlv1alpha1.ResourceMapping, error) {
	return controlObjectOf[controlv1alpha1.ResourceMapping](obj)
}

// sourceEntries reports whether m has entries of origin Source.
func sourceEntries(m *controlv1alpha1.ResourceMapping) bool {
	return slices.ContainsFunc(m.Spec.Related, func(r controlv1alpha1.RelatedResource) bool { return r.Origin == controlv1alpha1.RelatedOriginSource })
}

// sourceGVR returns the resource of m's spec.source.
func sourceGVR(m *controlv1alpha1.ResourceMapping) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: m.Spec.Source.Group, Version: m.Spec.Source.Version, Resource: m.Spec.Source.Resource}
}

// compileMapping returns the entries of origin Source of m compiled, from the cache when its
// uid and generation did not change. The error names the first entry that does not compile.
func (c *Controller) compileMapping(m *controlv1alpha1.ResourceMapping) ([]*dependencies.Related, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cm, ok := c.compiledMappings[m.Name]; ok && cm.uid == m.UID && cm.generation == m.Generation {
		return cm.related, cm.err
	}
	var out []*dependencies.Related
	var err error
	for i := range m.Spec.Related {
		e := &m.Spec.Related[i]
		if e.Origin != controlv1alpha1.RelatedOriginSource {
			continue
		}
		var r *dependencies.Related
		if r, err = dependencies.CompileRelated(fmt.Sprintf("spec.related[%s]", e.Identifier), e); err != nil {
			out = nil
			break
		}
		out = append(out, r)
	}
	c.compiledMappings[m.Name] = compiledMapping{uid: m.UID, generation: m.Generation, related: out, err: err}
	return out, err
}

// currentMappings returns the ResourceMappings of cluster with entries of origin Source,
// sorted by name, compiled (each spec once) and with the informer of their source resource
// (whole objects: the expressions may read any field), started on first use; a mapping
// assigned nowhere is left out (it applies nowhere). It returns an error when discovery
// cannot be read.
func (c *Controller) currentMappings(cluster string) ([]*mappingState, error) {
	var out []*mappingState
	for _, obj := range c.mappings.GetStore().List() {
		m, err := mappingOf(obj)
		if err != nil || m.Annotations[contract.ClusterAnnotation] != cluster || !sourceEntries(m) {
			continue
		}
		within := sets.New(locationsOf(m)...)
		if within.Len() == 0 {
			continue
		}
		ms := &mappingState{obj: m, gvr: sourceGVR(m)}
		var related []*dependencies.Related
		related, ms.compileErr = c.compileMapping(m)
		if ms.compileErr != nil {
			ms.entries = []*relatedState{{mapping: m, within: within}}
		}
		for _, r := range related {
			ms.entries = append(ms.entries, &relatedState{mapping: m, related: r, within: within})
		}
		if _, err := c.resolver.Kind(ms.gvr); served.IsNotServed(err) {
			continue // no objects
		} else if err != nil {
			return nil, fmt.Errorf("finding the kind of %s, the source resource of ResourceMapping %s: %w", ms.gvr, m.Name, err)
		}
		ms.informer = c.watch(ms.gvr, whole)
		out = append(out, ms)
	}
	slices.SortFunc(out, func(a, b *mappingState) int { return strings.Compare(a.obj.Name, b.obj.Name) })
	return out, nil
}

// enqueueMappingObjects queues the namespace of every object of a ResourceMapping's source
// resource.
func (c *Controller) enqueueMappingObjects(obj interface{}) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, err := mappingOf(obj); err == nil {
		c.enqueueResourceObjects(sourceGVR(m))
	}
}

// writeMappingStatuses brings the RelatedResolved condition of every ResourceMapping with
// entries of origin Source up to date (and removes it from one that has none any more). It
// writes with server-side apply of the status subresource under FieldManager, naming only
// that condition: the mappers' Accepted condition (written through their views) and every
// other field stay as they are, whoever wrote them. A condition is written only when it
// changed; a failed write waits for the next round.
func (c *Controller) writeMappingStatuses(ctx context.Context) {
	if c.mappings == nil || !c.mappings.HasSynced() {
		return
	}
	for _, obj := range c.mappings.GetStore().List() {
		m, err := mappingOf(obj)
		if err != nil {
			continue
		}
		old := meta.FindStatusCondition(m.Status.Conditions, controlv1alpha1.ResourceMappingRelatedResolved)
		conds := []metav1.Condition{}
		if sourceEntries(m) {
			cond := c.relatedCondition(m)
			if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message && old.ObservedGeneration == cond.ObservedGeneration {
				continue
			}
			if old != nil && old.Status == cond.Status {
				cond.LastTransitionTime = old.LastTransitionTime
			}
			conds = []metav1.Condition{cond}
		} else if old == nil {
			continue
		}
		body, err := json.Marshal(map[string]interface{}{
			"apiVersion": MappingResource.GroupVersion().String(), "kind": "ResourceMapping",
			"metadata": map[string]interface{}{"name": m.Name},
			"status":   map[string]interface{}{"conditions": conds},
		})
		if err != nil {
			continue
		}
		force := true
		_, err = c.dyn.Resource(MappingResource).Patch(ctx, m.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force}, "status")
		if err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Info("Writing a ResourceMapping's RelatedResolved condition failed; retrying", "mapping", m.Name, "err", err)
		}
	}
}

// relatedCondition returns m's RelatedResolved condition from what the controller found.
func (c *Controller) relatedCondition(m *controlv1alpha1.ResourceMapping) metav1.Condition {
	cond := metav1.Condition{Type: controlv1alpha1.ResourceMappingRelatedResolved, Status: metav1.ConditionTrue, Reason: controlv1alpha1.ReasonResolved,
		Message: "the related objects of origin Source follow each assigned object of spec.source to the locations of both", ObservedGeneration: m.Generation,
		LastTransitionTime: metav1.Now()}
	gvr := sourceGVR(m)
	_, compileErr := c.compileMapping(m)
	reason, message := c.unusable(gvr, compileErr, "the related objects")
	c.mu.Lock()
	var failures []string
	for _, byObject := range c.ruleFailures[mappingFailureKey(m.Name)] {
		for object, msg := range byObject {
			failures = append(failures, object+": "+msg)
		}
	}
	c.mu.Unlock()
	switch {
	case reason != "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reason, message
	case len(failures) > 0:
		slices.Sort(failures)
		cond.Status, cond.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonEvaluationFailed
		cond.Message = contract.Truncate(fmt.Sprintf("the related objects of %d objects cannot be found (their related objects keep the locations they have); first: %s", len(failures), failures[0]), 1024)
	}
	return cond
}
