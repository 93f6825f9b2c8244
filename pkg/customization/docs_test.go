package customization

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// TestDocsExample compiles the example of docs/customization.md and checks what it says east's
// and west's views show: REGION and the registry of the location's region.
func TestDocsExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/customization.md")
	if err != nil {
		t.Fatal(err)
	}
	_, example, _ := strings.Cut(string(doc), "## Example")
	_, block, _ := strings.Cut(example, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	c := &controlv1alpha1.Customization{}
	if err := yaml.UnmarshalStrict([]byte(block), c); err != nil {
		t.Fatalf("the example does not decode: %v\n%s", err, block)
	}
	s := snapshot(t, c)
	for loc, want := range map[string][2]string{"east": {"eu", "registry.eu.example/web:1.0"}, "west": {"us", "registry.us.example/web:1.0"}} {
		app := container(t, render(t, s, deployment(), loc), "app")
		if got, _ := env(app, "REGION"); got != want[0] || app["image"] != want[1] {
			t.Errorf("%s: REGION %q, image %v; want %v", loc, got, app["image"], want)
		}
	}
}
