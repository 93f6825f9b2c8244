package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestResourceMappingCRDRules applies the ResourceMapping CRD of artifacts/crds to a real
// kube-apiserver and creates one mapping per rule of its schema and CEL rules
// (docs/resourcemapping.md, "Validation and bad mappings"): each breaking mapping is refused
// with 422 Invalid and the rule's message, and a mapping using every field is accepted.
func TestResourceMappingCRDRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	framework.InstallControlCRD(t, ctx, source, mapper.MappingResource)
	mappings := dynamicClientFor(t, source).Resource(mapper.MappingResource)

	// good returns a spec that uses every field: a projection, names, and related entries of
	// both origins, found by a name and by labels.
	good := func() map[string]interface{} {
		target := gvrField(gizmosGVR)
		target["kind"] = "Gizmo"
		return map[string]interface{}{
			"source": gvrField(widgetsGVR),
			"target": target,
			"naming": map[string]interface{}{"namespace": `"tenant-" + cluster + "-" + namespace`, "name": `name + "-" + location`},
			"related": []interface{}{
				relatedSourceEntry("settings", map[string]interface{}{"name": "object.spec.configMap"}),
				relatedSourceEntry("dashboards", map[string]interface{}{"labelSelector": map[string]interface{}{widgetLabel: "object.metadata.name"}}),
				map[string]interface{}{
					"identifier": "credentials", "origin": "Target",
					"resource": gvrField(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}),
					"object":   map[string]interface{}{"name": `object.metadata.name + "-credentials"`},
					"name":     `object.metadata.name + "-" + location`,
				},
			},
		}
	}
	related := func(spec map[string]interface{}, i int) map[string]interface{} {
		return spec["related"].([]interface{})[i].(map[string]interface{})
	}
	for _, tc := range []struct {
		name   string
		change func(spec map[string]interface{})
		// want are parts of the refusal's message; nil: the mapping is accepted.
		want []string
	}{
		{"a mapping using every field", func(map[string]interface{}) {}, nil},
		{"an identity mapping (no target)", func(spec map[string]interface{}) { delete(spec, "target") }, nil},
		{"source in control.mapper.kcp.io", func(spec map[string]interface{}) {
			spec["source"] = gvrField(mapper.MappingResource)
		}, []string{"spec.source", "the resources of cluster-mapper's own groups cannot be mapped"}},
		{"source in mapper.kcp.io", func(spec map[string]interface{}) {
			spec["source"] = gvrField(schema.GroupVersionResource{Group: "mapper.kcp.io", Version: "v1alpha1", Resource: "locations"})
		}, []string{"spec.source", "the resources of cluster-mapper's own groups cannot be mapped"}},
		{"target equal to source", func(spec map[string]interface{}) {
			target := gvrField(widgetsGVR)
			target["kind"] = "Widget"
			spec["target"] = target
		}, []string{"spec.target names spec.source itself; leave it out for an identity mapping"}},
		{"a subresource as source", func(spec map[string]interface{}) {
			spec["source"].(map[string]interface{})["resource"] = "widgets/status"
		}, []string{"spec.source.resource", "name a resource, not a subresource"}},
		{"a subresource as target", func(spec map[string]interface{}) {
			spec["target"].(map[string]interface{})["resource"] = "gizmos/scale"
		}, []string{"spec.target.resource", "name a resource, not a subresource"}},
		{"a subresource as related resource", func(spec map[string]interface{}) {
			related(spec, 0)["resource"].(map[string]interface{})["resource"] = "configmaps/status"
		}, []string{"spec.related[0].resource.resource", "name a resource, not a subresource"}},
		{"a source without version", func(spec map[string]interface{}) {
			delete(spec["source"].(map[string]interface{}), "version")
		}, []string{"spec.source.version", "Required value"}},
		{"a target without kind", func(spec map[string]interface{}) {
			delete(spec["target"].(map[string]interface{}), "kind")
		}, []string{"spec.target.kind", "Required value"}},
		{"a kind that is not a Kind name", func(spec map[string]interface{}) {
			spec["target"].(map[string]interface{})["kind"] = "gizmo"
		}, []string{"spec.target.kind", "should match '^[A-Z][A-Za-z0-9]*$'"}},
		{"a related name for origin Source", func(spec map[string]interface{}) {
			related(spec, 0)["name"] = `object.metadata.name + "-x"`
		}, []string{"spec.related[0]", "name is the name of a copy brought up from the target: only for origin Target"}},
		{"both object.name and object.labelSelector", func(spec map[string]interface{}) {
			related(spec, 1)["object"].(map[string]interface{})["name"] = "object.spec.configMap"
		}, []string{"spec.related[1].object", "set exactly one of name and labelSelector"}},
		{"neither object.name nor object.labelSelector", func(spec map[string]interface{}) {
			related(spec, 0)["object"] = map[string]interface{}{}
		}, []string{"spec.related[0].object", "set exactly one of name and labelSelector"}},
		{"an identifier that is not a DNS label", func(spec map[string]interface{}) {
			related(spec, 0)["identifier"] = "Settings_1"
		}, []string{"spec.related[0].identifier", "should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"}},
		{"an origin that is neither Source nor Target", func(spec map[string]interface{}) {
			related(spec, 0)["origin"] = "Both"
		}, []string{"spec.related[0].origin", `Unsupported value: "Both"`}},
		{"two entries with one identifier", func(spec map[string]interface{}) {
			related(spec, 1)["identifier"] = "settings"
		}, []string{"spec.related[1]", "Duplicate value", `"identifier":"settings"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := good()
			tc.change(spec)
			u := &unstructured.Unstructured{Object: map[string]interface{}{
				"apiVersion": mapper.MappingResource.GroupVersion().String(), "kind": "ResourceMapping",
				"metadata": map[string]interface{}{"generateName": "rule-"},
				"spec":     spec,
			}}
			_, err := mappings.Create(ctx, u, metav1.CreateOptions{})
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("a good mapping is refused: %v", err)
			case tc.want == nil:
			case err == nil:
				t.Fatalf("accepted, want a refusal with %q", tc.want)
			case !apierrors.IsInvalid(err):
				t.Fatalf("refused with %v (reason %s), want 422 Invalid", err, apierrors.ReasonForError(err))
			default:
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the refusal %q does not say %q", err.Error(), w)
					}
				}
			}
		})
	}
}
