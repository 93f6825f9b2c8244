package mapper

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/cluster-mapper/cluster-mapper/pkg/schemacompat"
)

// SchemaState is what the mapper found comparing the schema of a resource's kind in the
// source (as the view publishes it) with the target's (docs/locations.md, "Resource
// compatibility").
type SchemaState struct {
	// Verdict is schemacompat's; Compatible also for a resource that is not compared (a
	// built-in group) or not compared yet.
	Verdict schemacompat.Verdict
	// Message says why when the verdict is not Compatible.
	Message string
}

// schemaCheck is the last comparison of one group version: the URLs of the two OpenAPI v3
// documents compared (each carries its document's hash, so a changed URL is a changed
// document) and the state found per resource.
type schemaCheck struct {
	viewURL, targetURL string
	states             map[string]SchemaState
}

// covers reports whether c holds a state for each of rs and no other.
func (c schemaCheck) covers(rs []*resource) bool {
	for _, r := range rs {
		if _, ok := c.states[r.gvr.Resource]; !ok {
			return false
		}
	}
	return len(c.states) == len(rs)
}

// customGroup reports whether resources of group may be defined by CustomResourceDefinitions,
// whose schemas the mapper compares: a group with a dot outside the Kubernetes project's
// k8s.io and kubernetes.io domains (which CRDs may use only with an approved API review). A
// built-in resource's schema is the target kube-apiserver's own; comparing it would report
// the fields a newer source adds as dropped by every older target.
func customGroup(group string) bool {
	return strings.Contains(group, ".") && !strings.HasSuffix(group, ".k8s.io") && !strings.HasSuffix(group, ".kubernetes.io")
}

// checkSchemas compares, for each resource of resources that the target serves and whose
// group may be a CRD's (customGroup), the OpenAPI v3 schema of its kind in the view's
// document with the target's (schemacompat.Check), and stores the result on the resource
// (resource.setSchema). A group version is compared again only when one of its two
// documents changed (its URL in the /openapi/v3 index carries its hash), so a refresh
// without change costs the two index reads. A document that cannot be read makes the state
// Unknown, never Incompatible. Called from refreshResources only (m.schemaChecks is not
// locked).
func (m *Mapper) checkSchemas(ctx context.Context, resources []*resource) {
	byGV := map[schema.GroupVersion][]*resource{}
	for _, r := range resources {
		// A projected resource (ResourceMapping) is written as another resource: there is no
		// schema of the same group version on the target to compare with.
		if customGroup(r.gvr.Group) && !r.halted.Load() && r.projection.Target.Resource == "" {
			byGV[r.gvr.GroupVersion()] = append(byGV[r.gvr.GroupVersion()], r)
		}
	}
	if len(byGV) == 0 {
		return
	}
	logger := klog.FromContext(ctx)
	viewPaths, verr := m.viewDiscovery.OpenAPIV3().Paths()
	targetPaths, terr := m.targetDiscovery.OpenAPIV3().Paths()
	next := map[schema.GroupVersion]schemaCheck{}
	for gv, rs := range byGV {
		states := map[string]SchemaState{}
		unknown := func(format string, args ...interface{}) {
			for _, r := range rs {
				states[r.gvr.Resource] = SchemaState{Verdict: schemacompat.Unknown, Message: fmt.Sprintf(format, args...)}
			}
		}
		key := "apis/" + gv.Group + "/" + gv.Version
		vp, vok := viewPaths[key]
		tp, tok := targetPaths[key]
		switch {
		case verr != nil:
			unknown("the view's OpenAPI cannot be read: %v", verr)
		case terr != nil:
			unknown("the target's OpenAPI cannot be read: %v", terr)
		case !vok:
			unknown("the view publishes no OpenAPI document of %s", gv)
		case !tok:
			unknown("the target publishes no OpenAPI document of %s", gv)
		default:
			if last, ok := m.schemaChecks[gv]; ok && last.viewURL == vp.ServerRelativeURL() && last.targetURL == tp.ServerRelativeURL() && last.covers(rs) {
				states, next[gv] = last.states, last
				break
			}
			if err := m.compareGroupVersion(gv, vp, tp, rs, states); err != nil {
				unknown("%v", err)
				break
			}
			next[gv] = schemaCheck{viewURL: vp.ServerRelativeURL(), targetURL: tp.ServerRelativeURL(), states: states}
		}
		for _, r := range rs {
			s := states[r.gvr.Resource]
			if r.setSchema(s) && s.Verdict != schemacompat.Compatible {
				logger.Info("The target's schema of a resource may not accept what the source's allows", "resource", r.name(), "verdict", s.Verdict.String(), "reason", s.Message)
			}
		}
	}
	m.schemaChecks = next
}

// compareGroupVersion reads the two documents of gv and fills states with the comparison of
// each resource's kind (its kind from the view's discovery). It returns an error when a
// document or the view's discovery cannot be read.
func (m *Mapper) compareGroupVersion(gv schema.GroupVersion, view, target openapi.GroupVersion, rs []*resource, states map[string]SchemaState) error {
	list, err := m.viewDiscovery.ServerResourcesForGroupVersion(gv.String())
	if err != nil {
		return fmt.Errorf("the view's discovery of %s cannot be read: %w", gv, err)
	}
	src, err := openAPISchemas(view)
	if err != nil {
		return fmt.Errorf("the view's OpenAPI document of %s cannot be read: %w", gv, err)
	}
	tgt, err := openAPISchemas(target)
	if err != nil {
		return fmt.Errorf("the target's OpenAPI document of %s cannot be read: %w", gv, err)
	}
	for _, r := range rs {
		kind := ""
		for _, ar := range list.APIResources {
			if ar.Name == r.gvr.Resource {
				kind = ar.Kind
			}
		}
		gvk := gv.WithKind(kind)
		res := schemacompat.Check(kindSchema(src, gvk), kindSchema(tgt, gvk))
		states[r.gvr.Resource] = SchemaState{Verdict: res.Verdict, Message: describeFindings(res)}
	}
	return nil
}

// openAPISchemas returns the components.schemas of gv's OpenAPI v3 document.
func openAPISchemas(gv openapi.GroupVersion) (map[string]*spec.Schema, error) {
	data, err := gv.Schema("application/json")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Components struct {
			Schemas map[string]*spec.Schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	return doc.Components.Schemas, nil
}

// kindSchema returns the schema of schemas whose x-kubernetes-group-version-kind names gvk
// (as kube-apiserver marks each kind's root schema), nil when there is none.
func kindSchema(schemas map[string]*spec.Schema, gvk schema.GroupVersionKind) *spec.Schema {
	for _, s := range schemas {
		var kinds []map[string]string
		if s == nil || s.Extensions.GetObject("x-kubernetes-group-version-kind", &kinds) != nil {
			continue
		}
		for _, k := range kinds {
			if k["group"] == gvk.Group && k["version"] == gvk.Version && k["kind"] == gvk.Kind {
				return s
			}
		}
	}
	return nil
}

// describeFindings returns the message of a result that is not Compatible: its first three
// findings and how many more there are; "" for Compatible.
func describeFindings(r schemacompat.Result) string {
	if r.Verdict == schemacompat.Compatible {
		return ""
	}
	parts := make([]string, 0, 3)
	for _, f := range r.Findings[:min(len(r.Findings), 3)] {
		parts = append(parts, f.String())
	}
	msg := strings.Join(parts, "; ")
	if len(r.Findings) > 3 {
		msg += fmt.Sprintf("; and %d more", len(r.Findings)-3)
	}
	return msg
}
