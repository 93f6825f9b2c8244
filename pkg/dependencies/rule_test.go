package dependencies

import (
	"context"
	"strings"
	"testing"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

func ruleSpec(expression string) *controlv1alpha1.DependencyRuleSpec {
	return &controlv1alpha1.DependencyRuleSpec{
		Resource:   controlv1alpha1.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		Expression: expression,
	}
}

// TestCompileRuleErrors: what does not compile is refused with the field and the reason.
func TestCompileRuleErrors(t *testing.T) {
	for _, tc := range []struct {
		name, expression, want string
	}{
		{"syntax", `["configmaps/" + object.spec.cm`, "spec.expression: ERROR"},
		{"undeclared variable", `["configmaps/" + obj.spec.cm]`, "undeclared reference to 'obj'"},
		{"not a list", `"configmaps/" + object.spec.cm`, "must return a list of references, but returns string"},
		{"a map, not a list", `{"configmaps": object.spec.cm}`, "must return a list of references"},
		{"unknown function", `object.spec.refs.frobnicate()`, "undeclared reference to 'frobnicate'"},
		{"mixed list", `["configmaps/a", 1]`, "expected type 'string' but found 'int'"},
	} {
		_, err := CompileRule(ruleSpec(tc.expression))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	spec := ruleSpec(`[]`)
	spec.Resource.Version = ""
	if _, err := CompileRule(spec); err == nil || !strings.Contains(err.Error(), "spec.resource") {
		t.Errorf("a resource without a version: %v", err)
	}
}

// TestRuleReferences evaluates rules on objects: references with and without a group,
// optional fields, and results that are not references.
func TestRuleReferences(t *testing.T) {
	obj := map[string]interface{}{"spec": map[string]interface{}{
		"configMap": "settings",
		"secrets":   []interface{}{"b-token", "a-token", "a-token"},
		"gadget":    "g1",
		"count":     int64(3),
	}}
	for _, tc := range []struct {
		name, expression, want, err string
	}{
		{"one ConfigMap", `["configmaps/" + object.spec.configMap]`, "configmaps/settings", ""},
		{"a list, sorted, without duplicates", `object.spec.secrets.map(s, "secrets/" + s)`, "secrets/a-token secrets/b-token", ""},
		{"a group", `["gadgets.example.com/" + object.spec.gadget]`, "gadgets.example.com/g1", ""},
		{"an optional field that is absent", `object.spec.?volumes.orValue([]).map(v, "persistentvolumeclaims/" + v)`, "", ""},
		{"no name", `["configmaps"]`, "", "is not resource/name"},
		{"not a string", `[object.spec.count]`, "", "reference 0 is int, not a string"},
		{"an invalid name", `["configmaps/Not_Valid"]`, "", `name "Not_Valid"`},
		{"an invalid resource", `["ConfigMap/settings"]`, "", `"ConfigMap" is not a resource`},
		{"a field the object lacks", `["configmaps/" + object.spec.missing]`, "", "no such key: missing"},
		{"a string, not a list", `object.spec.configMap`, "", "not a list of references"},
		{"too many", `[0].map(i, [1,2,3,4,5,6,7,8,9,10].map(j, [1,2,3,4,5,6,7,8,9,10].map(k, [1,2,3,4,5,6,7,8,9,10,11]))).flatten().flatten().flatten().map(n, "configmaps/c" + string(n))`, "", "more than 1000"},
	} {
		r, err := CompileRule(ruleSpec(tc.expression))
		if err != nil {
			t.Errorf("%s: does not compile: %v", tc.name, err)
			continue
		}
		got, err := r.References(context.Background(), obj)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == "" && refs(got) != tc.want:
			t.Errorf("%s: %q, want %q", tc.name, refs(got), tc.want)
		}
	}
}

// TestRuleCostLimit: an evaluation that exceeds the per-expression cost limit of admission
// policies fails with the cost error and returns no references, and one within it succeeds.
func TestRuleCostLimit(t *testing.T) {
	items := make([]interface{}, 300)
	for i := range items {
		items[i] = int64(i)
	}
	obj := map[string]interface{}{"spec": map[string]interface{}{"items": items}}
	// 300³ = 27 million iterations: far beyond celconfig.PerCallLimit.
	r, err := CompileRule(ruleSpec(`object.spec.items.map(a, object.spec.items.map(b, object.spec.items.map(c, a + b + c))).size() > 0 ? ["configmaps/x"] : []`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.References(context.Background(), obj)
	if err == nil || !strings.Contains(err.Error(), "cost limit exceeded") || got != nil {
		t.Errorf("an evaluation beyond the cost limit: %v, %v", got, err)
	}
	// 300 iterations are well within it.
	r, err = CompileRule(ruleSpec(`object.spec.items.filter(i, i < 2).map(i, "configmaps/c" + string(i))`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.References(context.Background(), obj); err != nil || refs(got) != "configmaps/c0 configmaps/c1" {
		t.Errorf("a cheap evaluation: %v, %v", refs(got), err)
	}
}
