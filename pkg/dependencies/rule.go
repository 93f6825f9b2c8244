package dependencies

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/cel/environment"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/celexpr"
)

// ObjectVarName is the CEL variable holding the referencing object in a DependencyRule's
// expression, named as in admission policies.
const ObjectVarName = "object"

// MaxReferences is the most references one evaluation may return.
const MaxReferences = 1000

// ruleEnv is the CEL environment of DependencyRules: Kubernetes' base environment (its
// libraries and cost model, for stored expressions, as Customizations are compiled) with the
// dynamic variable object.
var ruleEnv = celexpr.Env(environment.StoredExpressions, cel.Variable(ObjectVarName, cel.DynType))

// Rule is a compiled DependencyRule.
type Rule struct {
	// Resource is the resource whose objects the rule reads.
	Resource schema.GroupVersionResource
	program  cel.Program
}

// CompileRule compiles spec. The error names the field ("spec.expression: ...") and says
// why: a syntax or type error, an undeclared variable (only `object` is declared), or a
// result that cannot be a list. Evaluations are limited to celconfig.PerCallLimit, the cost
// limit of one admission policy expression, and check for it every celconfig.CheckFrequency
// iterations of a comprehension.
func CompileRule(spec *controlv1alpha1.DependencyRuleSpec) (*Rule, error) {
	gvr := schema.GroupVersionResource{Group: spec.Resource.Group, Version: spec.Resource.Version, Resource: spec.Resource.Resource}
	if gvr.Version == "" || gvr.Resource == "" {
		return nil, fmt.Errorf("spec.resource: version and resource are required")
	}
	prg, err := compileExpression("spec.expression", spec.Expression, types.ListKind, "a list of references")
	if err != nil {
		return nil, err
	}
	return &Rule{Resource: gvr, program: prg}, nil
}

// compileExpression compiles expression, the CEL expression of field, in the environment of
// DependencyRules (the variable object), for a result of kind (what names it in the error),
// with the cost limit of one admission policy expression. The error names field and says why:
// a syntax or type error, an undeclared variable, or a result that cannot be of kind.
func compileExpression(field, expression string, kind types.Kind, what string) (cel.Program, error) {
	prg, err := celexpr.Compile(ruleEnv, expression, kind, what)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", field, err)
	}
	return prg, nil
}

// References evaluates the rule on obj (an object of r.Resource as JSON) and returns its
// references, sorted by resource and name. It fails when the evaluation fails (an error, the
// cost limit, ctx ending) or returns something other than a list of at most MaxReferences
// strings in ParseReference's form.
func (r *Rule) References(ctx context.Context, obj map[string]interface{}) ([]Reference, error) {
	val, _, err := r.program.ContextEval(ctx, map[string]interface{}{ObjectVarName: obj})
	if err != nil {
		return nil, err
	}
	list, ok := val.(traits.Lister)
	if !ok {
		return nil, fmt.Errorf("the expression returned %s, not a list of references", val.Type().TypeName())
	}
	n, ok := list.Size().(types.Int)
	if !ok {
		return nil, fmt.Errorf("the expression returned a list of unknown size")
	}
	if n > MaxReferences {
		return nil, fmt.Errorf("the expression returned %d references, more than %d", n, MaxReferences)
	}
	var c collector
	for i := types.Int(0); i < n; i++ {
		v := list.Get(i)
		s, ok := v.(types.String)
		if !ok {
			return nil, fmt.Errorf("reference %d is %s, not a string resource/name", i, v.Type().TypeName())
		}
		ref, err := ParseReference(string(s))
		if err != nil {
			return nil, fmt.Errorf("reference %d: %w", i, err)
		}
		c.add(ref.Resource, ref.Name, false)
	}
	return c.list(), nil
}

// ParseReference parses a reference in kubectl's TYPE/NAME form with a plural, lowercase,
// group-qualified resource: "configmaps/settings", "gadgets.example.com/g1". It fails on
// another form, a resource that is not a lowercase name, or an invalid object name.
func ParseReference(s string) (Reference, error) {
	resource, name, ok := strings.Cut(s, "/")
	if !ok || strings.Contains(name, "/") {
		return Reference{}, fmt.Errorf("%q is not resource/name (e.g. configmaps/settings or gadgets.example.com/g1)", s)
	}
	if msgs := validation.IsDNS1123Subdomain(resource); len(msgs) > 0 {
		return Reference{}, fmt.Errorf("%q: %q is not a resource (plural, lowercase, group-qualified: gadgets.example.com)", s, resource)
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return Reference{}, fmt.Errorf("%q: name %q: %s", s, name, msgs[0])
	}
	return Reference{Resource: schema.ParseGroupResource(resource), Name: name}, nil
}
