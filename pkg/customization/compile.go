package customization

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	"k8s.io/apiserver/pkg/cel/environment"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// CompileError is a part of a Customization that does not compile: a CEL expression (syntax,
// types, an undeclared variable such as `authorizer`), a label selector, or a mutation whose
// patchType and fields disagree. The Customization is kept: every object it selects fails to
// render with a RenderError of reason ReasonCompilationFailed.
type CompileError struct {
	// Cluster, Namespace and Name identify the Customization (Cluster is "" on a plain source).
	Cluster, Namespace, Name string
	// Field is the path of what failed, e.g. "spec.mutations[0].jsonPatch.expression".
	Field string
	// Err says why.
	Err error
}

// Error implements error.
func (e CompileError) Error() string {
	return fmt.Sprintf("Customization %s: %s: %v", RuleKey{e.Cluster, e.Namespace, e.Name}, e.Field, e.Err)
}

// RuleKey identifies a Customization in the source: its logical cluster ("" on a plain source
// without one configured), namespace and name.
type RuleKey struct {
	Cluster, Namespace, Name string
}

// String returns cluster|namespace/name, or namespace/name on a plain source.
func (k RuleKey) String() string {
	if k.Cluster == "" {
		return k.Namespace + "/" + k.Name
	}
	return k.Cluster + "|" + k.Namespace + "/" + k.Name
}

// compiled is one compiled Customization, independent of the locations: its selectors, its
// matchConditions and mutations compiled by the MutatingAdmissionPolicy machinery. It is
// immutable after compile (gvrs is a concurrency-safe memo) and shared by the snapshots whose
// Customization has the same spec.
type compiled struct {
	key RuleKey
	// fingerprint is the SHA-256 of the spec's JSON: two compiled with equal keys and
	// fingerprints render alike.
	fingerprint [sha256.Size]byte

	resources []admissionregistrationv1.RuleWithOperations
	// objects selects objects by label; locationLabels locations by label (nil: any); names by
	// name (nil: any).
	objects        labels.Selector
	locationLabels labels.Selector
	names          map[string]bool

	compiler *plugincel.CompositedCompiler
	matcher  matchconditions.Matcher
	patchers []patch.Patcher
	// applyConfiguration[i] tells whether patchers[i] needs the resource's schema.
	applyConfiguration []bool

	// errs are the compile errors; when not empty the Customization renders nothing and
	// every object it selects fails.
	errs []CompileError

	gvrs *sync.Map // schema.GroupVersionResource -> bool: whether resources match

	// creation orders the Customizations of a namespace for its limits (the oldest first).
	creation metav1.Time
	// mutations is the number of the spec's mutations.
	mutations int
	// limited, when not "", says why a snapshot does not apply the Customization (its
	// namespace's limits, Limits): every object it selects fails to render with
	// ReasonLimitExceeded. Set on a snapshot's own copy (Compiler.Snapshot), never on the
	// compiled Customization the Compiler keeps.
	limited string
}

// fingerprint returns the SHA-256 of spec's JSON.
func fingerprint(spec *controlv1alpha1.CustomizationSpec) [sha256.Size]byte {
	b, _ := json.Marshal(spec) // a Go struct of strings, lists and maps: cannot fail
	return sha256.Sum256(b)
}

// compile compiles c, identified by key, whose spec has fingerprint fp. It never fails: what does not compile
// is recorded in errs. A label selector that does not parse selects everything (so the
// objects it was meant to select fail to render rather than silently render unchanged).
func compile(c *controlv1alpha1.Customization, key RuleKey, fp [sha256.Size]byte) *compiled {
	r := &compiled{key: key, fingerprint: fp, objects: labels.Everything(), gvrs: &sync.Map{},
		creation: c.CreationTimestamp, mutations: len(c.Spec.Mutations)}
	fail := func(field string, err error) {
		r.errs = append(r.errs, CompileError{Cluster: key.Cluster, Namespace: key.Namespace, Name: key.Name, Field: field, Err: err})
	}
	for _, rr := range c.Spec.Resources {
		r.resources = append(r.resources, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
			Rule:       admissionregistrationv1.Rule{APIGroups: rr.APIGroups, APIVersions: rr.APIVersions, Resources: rr.Resources},
		})
	}
	if c.Spec.ObjectSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(c.Spec.ObjectSelector)
		if err != nil {
			fail("spec.objectSelector", err)
		} else {
			r.objects = s
		}
	}
	if c.Spec.LocationSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(c.Spec.LocationSelector)
		if err != nil {
			fail("spec.locationSelector", err)
		} else {
			r.locationLabels = s
		}
	}
	if len(c.Spec.LocationNames) > 0 {
		r.names = make(map[string]bool, len(c.Spec.LocationNames))
		for _, n := range c.Spec.LocationNames {
			r.names[n] = true
		}
	}
	r.compileCEL(&c.Spec, fail)
	return r
}

// compileCEL compiles the variables, matchConditions and mutations as
// k8s.io/apiserver's mutating.compilePolicy does for a MutatingAdmissionPolicy without params
// and without authorizer (there is no requesting user), in the StoredExpressions environment.
func (r *compiled) compileCEL(spec *controlv1alpha1.CustomizationSpec, fail func(string, error)) {
	cc, err := newCompiler()
	if err != nil {
		fail("spec", fmt.Errorf("initializing the CEL compiler: %w", err))
		return
	}
	r.compiler = cc
	opts := plugincel.OptionalVariableDeclarations{}
	for i, v := range spec.Variables {
		res := cc.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, environment.StoredExpressions)
		if res.Error != nil {
			fail(fmt.Sprintf("spec.variables[%d].expression", i), res.Error)
		}
	}
	if len(spec.MatchConditions) > 0 {
		accessors := make([]plugincel.ExpressionAccessor, len(spec.MatchConditions))
		for i := range spec.MatchConditions {
			accessors[i] = (*matchconditions.MatchCondition)(&spec.MatchConditions[i])
		}
		cond := cc.CompileCondition(accessors, opts, environment.StoredExpressions)
		for _, err := range cond.CompilationErrors() {
			fail("spec.matchConditions", err)
		}
		// Fail: an error in a condition fails the rendering (there is no Ignore).
		failPolicy := admissionregistrationv1.Fail
		r.matcher = matchconditions.NewMatcher(cond, &failPolicy, "customization", "render", r.key.String())
	}
	patchOpts := opts
	patchOpts.HasPatchTypes = true
	for i, m := range spec.Mutations {
		var (
			accessor plugincel.ExpressionAccessor
			field    string
			newFn    func(plugincel.MutatingEvaluator) patch.Patcher
		)
		switch {
		case m.PatchType == admissionregistrationv1.PatchTypeJSONPatch && m.JSONPatch != nil:
			accessor, field, newFn = &patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, "jsonPatch", patch.NewJSONPatcher
		case m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && m.ApplyConfiguration != nil:
			accessor, field, newFn = &patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}, "applyConfiguration", patch.NewApplyConfigurationPatcher
		default:
			fail(fmt.Sprintf("spec.mutations[%d]", i), fmt.Errorf("patchType %q needs its field (jsonPatch for JSONPatch, applyConfiguration for ApplyConfiguration)", m.PatchType))
			continue
		}
		ev := cc.CompileMutatingEvaluator(accessor, patchOpts, environment.StoredExpressions)
		for _, err := range ev.CompilationErrors() {
			fail(fmt.Sprintf("spec.mutations[%d].%s.expression", i, field), err)
		}
		r.patchers = append(r.patchers, newFn(ev))
		r.applyConfiguration = append(r.applyConfiguration, m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration)
	}
}

// matchesResource reports whether gvr is among the Customization's resources, with the
// matching rules of admission webhooks and policies (k8s.io/apiserver's predicates/rules).
func (r *compiled) matchesResource(gvr schema.GroupVersionResource) bool {
	if v, ok := r.gvrs.Load(gvr); ok {
		return v.(bool)
	}
	// A namespaced object: the rules have no scope, so the namespace only has to be non-empty.
	attr := admission.NewAttributesRecord(nil, nil, schema.GroupVersionKind{}, "namespace", "", gvr, "", admission.Operation(admissionregistrationv1.OperationAll), nil, false, nil)
	match := slices.ContainsFunc(r.resources, func(rule admissionregistrationv1.RuleWithOperations) bool {
		return (&rules.Matcher{Rule: rule, Attr: attr}).Matches()
	})
	r.gvrs.Store(gvr, match)
	return match
}

// selectsLocation reports whether the Customization selects loc (by name and labels).
func (r *compiled) selectsLocation(loc *locationInfo) bool {
	if r.names != nil && !r.names[loc.Name] {
		return false
	}
	return r.locationLabels == nil || r.locationLabels.Matches(loc.labels)
}

// selectsObject reports whether the Customization selects an object of gvr in cluster and
// namespace with these labels (read in place: a map[string]interface{} of strings).
func (r *compiled) selectsObject(gvr schema.GroupVersionResource, cluster, namespace string, objLabels labels.Labels) bool {
	return r.key.Cluster == cluster && r.key.Namespace == namespace && r.matchesResource(gvr) &&
		r.objects.Matches(objLabels)
}

// sameAs reports whether r and o render alike: the same Customization with the same spec,
// applied by both or limited by both.
func (r *compiled) sameAs(o *compiled) bool {
	return r == o || (r.key == o.key && r.fingerprint == o.fingerprint && (r.limited == "") == (o.limited == ""))
}

// compileErr is the error of a rendering that a compile error prevents.
func (r *compiled) compileErr() error {
	errs := make([]string, 0, len(r.errs))
	for _, e := range r.errs {
		errs = append(errs, e.Field+": "+contract.Truncate(e.Err.Error(), 512))
	}
	return fmt.Errorf("the Customization does not compile: %v", errs)
}

// unstructuredLabels reads an unstructured object's metadata.labels in place as labels.Labels.
type unstructuredLabels map[string]interface{}

// Has implements labels.Labels.
func (l unstructuredLabels) Has(k string) bool { _, ok := l[k]; return ok }

// Get implements labels.Labels.
func (l unstructuredLabels) Get(k string) string { v, _ := l[k].(string); return v }

// Lookup implements labels.Labels.
func (l unstructuredLabels) Lookup(k string) (string, bool) {
	v, ok := l[k]
	s, _ := v.(string)
	return s, ok
}
