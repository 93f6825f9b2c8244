package dependencies

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/served"
	"github.com/cluster-mapper/cluster-mapper/pkg/dependencies"
)

// ruleState is one DependencyRule as a round uses it.
type ruleState struct {
	obj *controlv1alpha1.DependencyRule
	gvr schema.GroupVersionResource
	// rule is the compiled rule; nil when it does not compile (compileErr says why).
	rule       *dependencies.Rule
	compileErr error
	// notServed is set when the source does not serve gvr: the rule has no objects.
	notServed error
	// informer holds the objects of gvr (whole objects), when served.
	informer toolscache.SharedIndexInformer
}

// compiledRule is a rule compiled at one uid and generation.
type compiledRule struct {
	uid        types.UID
	generation int64
	rule       *dependencies.Rule
	err        error
}

// ruleOf converts an informer object into a DependencyRule.
func ruleOf(obj interface{}) (*controlv1alpha1.DependencyRule, error) {
	return controlObjectOf[controlv1alpha1.DependencyRule](obj)
}

// controlObjectOf converts an informer object (unstructured) into the control object T (a
// DependencyRule, a ResourceMapping); it fails on another type or fields T does not decode.
func controlObjectOf[T any](obj interface{}) (*T, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("not an object: %T", obj)
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, err
	}
	return out, nil
}

// currentRules returns the DependencyRules of the source, by name, compiled (each spec once)
// and with the informer of their resource, started on first use. It returns an error when
// discovery cannot be read. Rules of other logical clusters than cluster are left out
// (cluster "" on a plain source keeps every rule).
func (c *Controller) currentRules(cluster string) ([]*ruleState, error) {
	var out []*ruleState
	for _, obj := range c.rules.GetStore().List() {
		r, err := ruleOf(obj)
		if err != nil || r.Annotations[contract.ClusterAnnotation] != cluster {
			continue
		}
		rs := &ruleState{obj: r, gvr: schema.GroupVersionResource{Group: r.Spec.Resource.Group, Version: r.Spec.Resource.Version, Resource: r.Spec.Resource.Resource}}
		rs.rule, rs.compileErr = c.compile(r)
		if _, err := c.resolver.Kind(rs.gvr); served.IsNotServed(err) {
			rs.notServed = err
		} else if err != nil {
			return nil, fmt.Errorf("finding the kind of %s, the resource of DependencyRule %s: %w", rs.gvr, r.Name, err)
		} else {
			rs.informer = c.watch(rs.gvr, whole)
		}
		out = append(out, rs)
	}
	slices.SortFunc(out, func(a, b *ruleState) int { return strings.Compare(a.obj.Name, b.obj.Name) })
	return out, nil
}

// compile returns r compiled, from the cache when its uid and generation did not change.
func (c *Controller) compile(r *controlv1alpha1.DependencyRule) (*dependencies.Rule, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cr, ok := c.compiled[r.Name]; ok && cr.uid == r.UID && cr.generation == r.Generation {
		return cr.rule, cr.err
	}
	rule, err := dependencies.CompileRule(&r.Spec)
	c.compiled[r.Name] = compiledRule{uid: r.UID, generation: r.Generation, rule: rule, err: err}
	return rule, err
}

// recordRuleFailures replaces the evaluation failures of the namespace key nsKey: failures
// by rule name, then "namespace/name".
func (c *Controller) recordRuleFailures(nsKey string, failures map[string]map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, byNS := range c.ruleFailures {
		if _, ok := failures[name]; !ok {
			delete(byNS, nsKey)
		}
	}
	for name, f := range failures {
		if c.ruleFailures[name] == nil {
			c.ruleFailures[name] = map[string]map[string]string{}
		}
		c.ruleFailures[name][nsKey] = f
	}
}

// writeRuleStatuses brings the status of every DependencyRule up to date: Ready with the
// reason CompilationFailed, ResourceNotServed, EvaluationFailed (with the first failures) or
// Evaluated. A status is written (with the rule's resourceVersion as precondition) only when
// it changed; a conflict waits for the next round.
func (c *Controller) writeRuleStatuses(ctx context.Context) {
	if !c.rules.HasSynced() {
		return
	}
	for _, obj := range c.rules.GetStore().List() {
		r, err := ruleOf(obj)
		if err != nil {
			continue
		}
		status := c.ruleStatus(r)
		if apiequality.Semantic.DeepEqual(status, r.Status) {
			continue
		}
		u := obj.(*unstructured.Unstructured).DeepCopy()
		st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
		if err != nil {
			continue
		}
		u.Object["status"] = st
		_, err = c.dyn.Resource(RuleResource).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Info("Writing a DependencyRule's status failed; retrying", "rule", r.Name, "err", err)
		}
	}
}

// ruleStatus returns r's status from what the controller found; the Ready condition keeps its
// lastTransitionTime unless its status changes.
func (c *Controller) ruleStatus(r *controlv1alpha1.DependencyRule) controlv1alpha1.DependencyRuleStatus {
	st := controlv1alpha1.DependencyRuleStatus{ObservedGeneration: r.Generation, Conditions: slices.Clone(r.Status.Conditions)}
	cond := metav1.Condition{Type: controlv1alpha1.DependencyRuleReady, Status: metav1.ConditionTrue, Reason: controlv1alpha1.ReasonEvaluated,
		Message: "the expression evaluated on every assigned object of the resource", ObservedGeneration: r.Generation}
	gvr := schema.GroupVersionResource{Group: r.Spec.Resource.Group, Version: r.Spec.Resource.Version, Resource: r.Spec.Resource.Resource}
	_, compileErr := c.compile(r)
	reason, message := c.unusable(gvr, compileErr, "the dependencies of the resource's objects")
	c.mu.Lock()
	var failures []controlv1alpha1.DependencyRuleFailure
	for _, byObject := range c.ruleFailures[r.Name] {
		for object, msg := range byObject {
			ns, name, _ := strings.Cut(object, "/")
			failures = append(failures, controlv1alpha1.DependencyRuleFailure{Namespace: ns, Name: name, Message: contract.Truncate(msg, 1024)})
		}
	}
	c.mu.Unlock()
	switch {
	case reason != "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reason, message
	case len(failures) > 0:
		slices.SortFunc(failures, func(a, b controlv1alpha1.DependencyRuleFailure) int {
			return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})
		cond.Status, cond.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonEvaluationFailed
		cond.Message = fmt.Sprintf("the expression failed on %d objects (see status.failures); their dependencies keep the locations they have", len(failures))
		st.FailingObjects = int64(len(failures))
		st.Failures = failures[:min(len(failures), controlv1alpha1.MaxDependencyRuleFailures)]
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	return st
}

// unusable returns the reason and message of the False condition of a DependencyRule or
// ResourceMapping whose expressions over the objects of gvr compiled with compileErr:
// CompilationFailed, or ResourceNotServed (the source does not serve gvr, or mapper-controller
// cannot list it); "" when neither. kept names what keeps its locations meanwhile.
func (c *Controller) unusable(gvr schema.GroupVersionResource, compileErr error, kept string) (reason, message string) {
	if compileErr != nil {
		return controlv1alpha1.ReasonCompilationFailed, contract.Truncate(compileErr.Error()+"; "+kept+" keep the locations they have", 1024)
	}
	if _, err := c.resolver.Kind(gvr); served.IsNotServed(err) {
		return controlv1alpha1.ReasonResourceNotServed, contract.Truncate(err.Error(), 1024)
	}
	if c.informers.Watches(gvr) && c.listFailed(gvr, true, c.informers.Informer(gvr)) {
		return controlv1alpha1.ReasonResourceNotServed, contract.Truncate(fmt.Sprintf("mapper-controller cannot list %s: %v; no dependency loses a location until it can",
			gvr.GroupResource(), c.informers.ListError(gvr, true)), 1024)
	}
	return "", ""
}
