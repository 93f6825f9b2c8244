package mapper

import (
	"context"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/cluster-mapper/cluster-mapper/pkg/celexpr"
)

// The CEL variables of a ResourceMapping's related entries (docs/resourcemapping.md, "Related
// objects: origin Target"): object.name and the labelSelector values see the main object's copy
// on the target as `object`; the copy's name sees the main source object as `object` and the
// target's related object as `related`. `location` and `identifier` are strings.
const (
	relatedObjectVar     = "object"
	relatedRelatedVar    = "related"
	relatedLocationVar   = "location"
	relatedIdentifierVar = "identifier"
)

// relatedEnv is the CEL environment of related entries: Kubernetes' base environment for
// stored expressions with the four variables above.
var relatedEnv = celexpr.Env(environment.StoredExpressions,
	cel.Variable(relatedObjectVar, cel.DynType),
	cel.Variable(relatedRelatedVar, cel.DynType),
	cel.Variable(relatedLocationVar, cel.StringType),
	cel.Variable(relatedIdentifierVar, cel.StringType),
)

// stringProgram is a compiled CEL expression that returns a string.
type stringProgram struct {
	expr    string
	program cel.Program
}

// compileString compiles expr, a CEL expression of a related entry that must return a string.
// The error says why (a syntax or type error, an undeclared variable, another result type).
// Evaluations are limited to celconfig.PerCallLimit, the cost limit of one admission policy
// expression, checked every celconfig.CheckFrequency iterations of a comprehension.
func compileString(expr string) (*stringProgram, error) {
	prg, err := celexpr.Compile(relatedEnv, expr, types.StringKind, "a string")
	if err != nil {
		return nil, err
	}
	return &stringProgram{expr: expr, program: prg}, nil
}

// eval evaluates p with vars (JSON objects for object and related, strings for location and
// identifier) and returns its string. It fails when the evaluation fails (a missing field, the
// cost limit, ctx ending) or returns something other than a string.
func (p *stringProgram) eval(ctx context.Context, vars map[string]interface{}) (string, error) {
	val, _, err := p.program.ContextEval(ctx, vars)
	if err != nil {
		return "", fmt.Errorf("%q: %w", p.expr, err)
	}
	s, ok := val.(types.String)
	if !ok {
		return "", fmt.Errorf("%q returned %s, not a string", p.expr, val.Type().TypeName())
	}
	return string(s), nil
}
