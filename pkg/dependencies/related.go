package dependencies

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// Related is a compiled entry of origin Source of a ResourceMapping's spec.related
// (docs/resourcemapping.md, "Related objects: origin Source"): it finds, from one object of
// the mapping's source resource, the related objects of its namespace, by a name or by labels.
type Related struct {
	// Identifier is the entry's identifier.
	Identifier string
	// Resource is the resource of the related objects.
	Resource schema.GroupResource
	// name returns the related object's name; nil when the entry selects by labels.
	name cel.Program
	// keys are the label keys of the selector, sorted, and values their expressions.
	keys   []string
	values []cel.Program
}

// Selection is what a Related entry found from one object: the name of one related object
// of Resource, or the labels every related object carries (all of them: a label selector of
// equality requirements). Both empty: no related object.
type Selection struct {
	Resource schema.GroupResource
	Name     string
	Labels   labels.Set
}

// Empty reports whether s selects nothing.
func (s Selection) Empty() bool { return s.Name == "" && s.Labels == nil }

// CompileRelated compiles entry, the element of spec.related at field ("spec.related[config]"),
// an entry of origin Source. Its expressions see the main object as `object` and are compiled
// and limited as a DependencyRule's (CompileRule): Kubernetes' CEL libraries for stored
// expressions and the cost limit of one admission policy expression. The error names the
// field and says why: an entry of another origin, not exactly one of object.name and
// object.labelSelector, a label key that is not a qualified name, an expression that does not
// compile or cannot return a string.
func CompileRelated(field string, entry *controlv1alpha1.RelatedResource) (*Related, error) {
	if entry.Origin != controlv1alpha1.RelatedOriginSource {
		return nil, fmt.Errorf("%s.origin: %q is not %q", field, entry.Origin, controlv1alpha1.RelatedOriginSource)
	}
	if entry.Resource.Version == "" || entry.Resource.Resource == "" {
		return nil, fmt.Errorf("%s.resource: version and resource are required", field)
	}
	r := &Related{Identifier: entry.Identifier, Resource: schema.GroupResource{Group: entry.Resource.Group, Resource: entry.Resource.Resource}}
	if (entry.Object.Name == "") == (len(entry.Object.LabelSelector) == 0) {
		return nil, fmt.Errorf("%s.object: set exactly one of name and labelSelector", field)
	}
	if entry.Object.Name != "" {
		prg, err := compileExpression(field+".object.name", entry.Object.Name, types.StringKind, "a string")
		if err != nil {
			return nil, err
		}
		r.name = prg
		return r, nil
	}
	for k := range entry.Object.LabelSelector {
		r.keys = append(r.keys, k)
	}
	slices.Sort(r.keys)
	for _, k := range r.keys {
		f := fmt.Sprintf("%s.object.labelSelector[%s]", field, k)
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return nil, fmt.Errorf("%s: the key is not a label key: %s", f, msgs[0])
		}
		prg, err := compileExpression(f, entry.Object.LabelSelector[k], types.StringKind, "a string")
		if err != nil {
			return nil, err
		}
		r.values = append(r.values, prg)
	}
	return r, nil
}

// Select evaluates the entry on obj (a main object as JSON). By name: an empty name selects
// nothing (`object.spec.?configMap.orValue("")` for an optional reference). It fails when an
// evaluation fails (an error, the cost limit, ctx ending), returns something other than a
// string, or returns a name that is not a DNS-1123 subdomain or a value that is not a label
// value.
func (r *Related) Select(ctx context.Context, obj map[string]interface{}) (Selection, error) {
	sel := Selection{Resource: r.Resource}
	if r.name != nil {
		name, err := evalString(ctx, r.name, obj)
		if err != nil {
			return Selection{}, fmt.Errorf("object.name: %w", err)
		}
		if name == "" {
			return sel, nil
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return Selection{}, fmt.Errorf("object.name returned %q: %s", name, msgs[0])
		}
		sel.Name = name
		return sel, nil
	}
	sel.Labels = labels.Set{}
	for i, k := range r.keys {
		v, err := evalString(ctx, r.values[i], obj)
		if err != nil {
			return Selection{}, fmt.Errorf("object.labelSelector[%s]: %w", k, err)
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			return Selection{}, fmt.Errorf("object.labelSelector[%s] returned %q: %s", k, v, msgs[0])
		}
		sel.Labels[k] = v
	}
	return sel, nil
}

// evalString evaluates prg on obj and returns its string result.
func evalString(ctx context.Context, prg cel.Program, obj map[string]interface{}) (string, error) {
	val, _, err := prg.ContextEval(ctx, map[string]interface{}{ObjectVarName: obj})
	if err != nil {
		return "", err
	}
	s, ok := val.(types.String)
	if !ok {
		return "", fmt.Errorf("returned %s, not a string", val.Type().TypeName())
	}
	return string(s), nil
}
