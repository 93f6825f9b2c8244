package customization

import (
	"context"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// LocationVarName is the CEL variable holding the location a rendering is for: an object with
// the name and labels of the location's SyncTarget, location.metadata.name and
// location.metadata.labels (a map of strings, empty when the SyncTarget has none or the
// location has no SyncTarget). The shape is that of `object`, `params` and `namespaceObject`, so
// `location.metadata.labels['region']` reads as a MutatingAdmissionPolicy author expects. The
// SyncTarget's annotations and status are not part of it (least disclosure, docs/tenancy.md):
// `location.metadata.annotations` is a compilation error. In the Bound location-access mode a
// rendering is only ever made for a location bound to the object's namespace.
const LocationVarName = "location"

// locationType is the CEL type of the `location` variable. Declaring the fields (rather than
// dyn) makes a misspelt field, such as location.metadata.lables, a compilation error.
var locationType = func() *apiservercel.DeclType {
	field := func(name string, t *apiservercel.DeclType) *apiservercel.DeclField {
		return apiservercel.NewDeclField(name, t, true, nil, nil)
	}
	strings := apiservercel.NewMapType(apiservercel.StringType, apiservercel.StringType, -1)
	metadata := apiservercel.NewObjectType("kcp.LocationMetadata", map[string]*apiservercel.DeclField{
		"name":   field("name", apiservercel.StringType),
		"labels": field("labels", strings),
	})
	return apiservercel.NewObjectType("kcp.Location", map[string]*apiservercel.DeclField{
		"metadata": field("metadata", metadata),
	})
}()

// newCompiler returns a MutatingAdmissionPolicy compiler (plugincel.NewCompositedCompiler over
// the base environment of k8s.io/apiserver at its default compatibility version, as
// mutating.compilePolicy builds one per policy) whose environment also declares `location`.
//
// Why the compiler's parts are replaced: the machinery's activation (plugincel's
// evaluationActivation) resolves only its own variables (object, oldObject, params, request,
// namespaceObject, authorizer, variables), so a declared `location` would compile and then
// fail at evaluation. The CompositedCompiler's embedded Compiler, ConditionCompiler and
// MutatingCompiler are exported for replacement; here they are the machinery's own compiler
// with every compiled program wrapped by locationProgram, which adds `location` to the
// activation from the evaluation's context (withLocation). Everything else — variables,
// matchConditions, the JSONPatch and ApplyConfiguration evaluation, cost accounting — is the
// machinery's. The alternative, binding the SyncTarget as `params`, would need no wrapper but
// gives authors a name that says nothing and that a MutatingAdmissionPolicy uses for its
// parameter resource.
func newCompiler() (*plugincel.CompositedCompiler, error) {
	envSet, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable(LocationVarName, locationType.CelType())},
		DeclTypes:         []*apiservercel.DeclType{locationType},
	})
	if err != nil {
		return nil, err
	}
	cc, err := plugincel.NewCompositedCompiler(envSet)
	if err != nil {
		return nil, err
	}
	lc := locationCompiler{Compiler: cc.Compiler}
	cc.Compiler, cc.ConditionCompiler, cc.MutatingCompiler = lc, lc, lc
	return cc, nil
}

// locationCompiler is the machinery's Compiler with every program wrapped by locationProgram;
// as ConditionCompiler and MutatingCompiler it builds the machinery's evaluators
// (plugincel.NewCondition, plugincel.NewMutatingEvaluator) from such programs.
type locationCompiler struct {
	plugincel.Compiler
}

// CompileCELExpression compiles with the machinery and wraps the program.
func (c locationCompiler) CompileCELExpression(e plugincel.ExpressionAccessor, opts plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.CompilationResult {
	r := c.Compiler.CompileCELExpression(e, opts, mode)
	if r.Program != nil {
		r.Program = locationProgram{Program: r.Program}
	}
	return r
}

// CompileCondition compiles each expression (as plugincel's conditionCompiler does).
func (c locationCompiler) CompileCondition(exprs []plugincel.ExpressionAccessor, opts plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.ConditionEvaluator {
	results := make([]plugincel.CompilationResult, len(exprs))
	for i, e := range exprs {
		if e != nil {
			results[i] = c.CompileCELExpression(e, opts, mode)
		}
	}
	return plugincel.NewCondition(results)
}

// CompileMutatingEvaluator compiles a mutation's expression (as plugincel's mutatingCompiler does).
func (c locationCompiler) CompileMutatingEvaluator(e plugincel.ExpressionAccessor, opts plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.MutatingEvaluator {
	return plugincel.NewMutatingEvaluator(c.CompileCELExpression(e, opts, mode))
}

// locationProgram evaluates a compiled program with `location` added to the machinery's
// activation, taken from the context (withLocation). Without one in the context, `location`
// is unbound and an expression using it fails with CEL's "no such attribute" error.
type locationProgram struct {
	cel.Program
}

// ContextEval evaluates with the location of ctx, and counts the cost in the Meter of ctx
// (WithMeter), if any.
func (p locationProgram) ContextEval(ctx context.Context, input any) (ref.Val, *cel.EvalDetails, error) {
	if b, ok := ctx.Value(locationKey{}).(*locationBinding); ok {
		act, err := interpreter.NewActivation(input)
		if err != nil {
			return nil, nil, err
		}
		input = interpreter.NewHierarchicalActivation(act, b)
	}
	v, details, err := p.Program.ContextEval(ctx, input)
	if m := meterFrom(ctx); m != nil && details != nil {
		if cost := details.ActualCost(); cost != nil {
			m.add(*cost)
		}
	}
	return v, details, err
}

// locationKey is the context key of the location binding.
type locationKey struct{}

// withLocation returns ctx carrying b as the value of `location` for the programs evaluated in it.
func withLocation(ctx context.Context, b *locationBinding) context.Context {
	return context.WithValue(ctx, locationKey{}, b)
}

// locationBinding is an activation resolving only `location`, to its CEL value (a map in the
// shape of locationType, built once per location and snapshot, read only).
type locationBinding struct {
	value map[string]any
}

// ResolveName implements interpreter.Activation.
func (b *locationBinding) ResolveName(name string) (any, bool) {
	if name == LocationVarName {
		return b.value, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (b *locationBinding) Parent() interpreter.Activation { return nil }
