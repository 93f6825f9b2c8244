package celexpr

import (
	"context"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apiserver/pkg/cel/environment"
)

// TestCompile checks the result-type check, undeclared variables and that programs stop at
// the cost limit of one admission policy expression.
func TestCompile(t *testing.T) {
	env := Env(environment.StoredExpressions, cel.Variable("object", cel.DynType), cel.Variable("name", cel.StringType))
	for _, tc := range []struct {
		expr string
		kind types.Kind
		want string // "" compiles
	}{
		{`name + "-x"`, types.StringKind, ""},
		{`object.spec.name`, types.StringKind, ""}, // dynamic: checked at evaluation
		{`1`, types.StringKind, "must return a string, but returns int"},
		{`1`, types.DynKind, ""},
		{`other`, types.DynKind, "undeclared reference to 'other'"},
		{`name +`, types.StringKind, "Syntax error"},
	} {
		_, err := Compile(env, tc.expr, tc.kind, "a string")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.expr, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.expr, err, tc.want)
		}
	}
	prg, err := Compile(env, `[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, [1,2,3,4,5,6,7,8,9,10].all(g, a+b+c+d+e+f+g > 0)))))))`, types.BoolKind, "a bool")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := prg.ContextEval(context.Background(), map[string]interface{}{"object": map[string]interface{}{}, "name": "n"}); err == nil || !strings.Contains(err.Error(), "cost limit") {
		t.Errorf("an expression of 10^7 steps evaluated with error %v, want the cost limit", err)
	}
}
