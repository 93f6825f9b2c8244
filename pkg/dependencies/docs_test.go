package dependencies

import (
	"context"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// TestDocsExample compiles the DependencyRule of docs/dependencies.md and evaluates it on a
// Widget with and without its optional fields.
func TestDocsExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/dependencies.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Custom kinds: DependencyRule")
	_, block, _ := strings.Cut(section, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	r := &controlv1alpha1.DependencyRule{}
	if err := yaml.UnmarshalStrict([]byte(block), r); err != nil {
		t.Fatalf("the example does not decode: %v\n%s", err, block)
	}
	rule, err := CompileRule(&r.Spec)
	if err != nil {
		t.Fatal(err)
	}
	full := map[string]interface{}{"spec": map[string]interface{}{"configMaps": []interface{}{"a", "b"}, "gadget": "g"}}
	if got, err := rule.References(context.Background(), full); err != nil || refs(got) != "configmaps/a configmaps/b gadgets.example.com/g" {
		t.Errorf("a Widget with both: %q, %v", refs(got), err)
	}
	if got, err := rule.References(context.Background(), map[string]interface{}{"spec": map[string]interface{}{}}); err != nil || len(got) != 0 {
		t.Errorf("a Widget with neither: %q, %v", refs(got), err)
	}
}
