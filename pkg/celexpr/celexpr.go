// Package celexpr builds the CEL environments and programs of cluster-mapper's control
// objects (DependencyRules, StatusCollectors, ResourceMappings) from Kubernetes' own CEL
// libraries: one base environment, one compile step with a result-type check, and the cost
// limit of one admission policy expression. Customizations are compiled by the
// MutatingAdmissionPolicy machinery instead (pkg/customization).
package celexpr

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Env returns Kubernetes' base CEL environment (k8s.io/apiserver/pkg/cel/environment at its
// default compatibility version: the libraries and cost model of CRD validation rules and
// admission policies) for mode, environment.StoredExpressions for expressions kept in objects
// (they must keep compiling as the libraries grow) or environment.NewExpressions, with vars
// declared. It panics when the declarations are invalid: a programming error, met at package
// initialization.
func Env(mode environment.Type, vars ...cel.EnvOption) *cel.Env {
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        vars,
	})
	if err != nil {
		panic(err)
	}
	e, err := set.Env(mode)
	if err != nil {
		panic(err)
	}
	return e
}

// Compile compiles expression in env and returns its program, whose evaluations are limited to
// celconfig.PerCallLimit (the cost limit of one admission policy expression) and check for it
// every celconfig.CheckFrequency iterations of a comprehension. The result must be of kind, or
// dynamic (types.DynKind accepts any result); what names the expected result in the error ("a
// string"). The error says why: a syntax or type error, an undeclared variable, or another
// result type; it does not name the field, which the caller adds.
func Compile(env *cel.Env, expression string, kind types.Kind, what string) (cel.Program, error) {
	ast, iss := env.Compile(expression)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if out := ast.OutputType(); kind != types.DynKind && out.Kind() != kind && out.Kind() != types.DynKind && out.Kind() != types.AnyKind {
		return nil, fmt.Errorf("must return %s, but returns %s", what, out)
	}
	prg, err := env.Program(ast, cel.CostLimit(celconfig.PerCallLimit), cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		return nil, err
	}
	return prg, nil
}
