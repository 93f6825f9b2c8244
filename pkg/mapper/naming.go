package mapper

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/cel/environment"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/celexpr"
)

// The CEL variables of a ResourceMapping's spec.naming (docs/resourcemapping.md, "Names"):
// NamingLocationVar is a string, the mapper's location; NamingSourceVar a map of strings with
// the keys "cluster", "namespace" and "name", the source object's logical cluster, namespace
// and name (`source.namespace`: `namespace` is a reserved word of CEL, which cannot be a
// variable but can be a key selected by a dot).
const (
	NamingLocationVar = "location"
	NamingSourceVar   = "source"
)

// namingEnv is the CEL environment of spec.naming: Kubernetes' base environment (its
// libraries and cost model, for stored expressions, as DependencyRules and Customizations are
// compiled) with the variables location and source.
var namingEnv = celexpr.Env(environment.StoredExpressions,
	cel.Variable(NamingLocationVar, cel.StringType),
	cel.Variable(NamingSourceVar, cel.MapType(cel.StringType, cel.StringType)),
)

// Naming is a ResourceMapping's compiled spec.naming: where the copy of each source object is
// written. A nil *Naming keeps the source name and leaves the namespace to the namespace
// mapping. It is safe for concurrent use.
type Naming struct {
	spec            controlv1alpha1.ResourceMappingNaming
	namespace, name cel.Program // nil when the field is empty
}

// CompileNaming compiles spec (nil, or both fields empty: nil, no error). The error names the
// field ("spec.naming.name: ...") and says why: a syntax or type error, an undeclared variable
// (only location and source are declared), or a result that is not a
// string. Evaluations are limited to celconfig.PerCallLimit, the cost limit of one admission
// policy expression, checked every celconfig.CheckFrequency comprehension iterations.
func CompileNaming(spec *controlv1alpha1.ResourceMappingNaming) (*Naming, error) {
	if spec == nil || (spec.Namespace == "" && spec.Name == "") {
		return nil, nil
	}
	n := &Naming{spec: *spec}
	for _, f := range []struct {
		field, expr string
		prg         *cel.Program
	}{{"spec.naming.namespace", spec.Namespace, &n.namespace}, {"spec.naming.name", spec.Name, &n.name}} {
		if f.expr == "" {
			continue
		}
		prg, err := celexpr.Compile(namingEnv, f.expr, types.StringKind, "a string")
		if err != nil {
			hint := ""
			if strings.Contains(err.Error(), "reserved identifier: namespace") {
				hint = " (namespace is a reserved word of CEL: write the source namespace as " + NamingSourceVar + ".namespace)"
			}
			return nil, fmt.Errorf("%s: %v%s", f.field, err, hint)
		}
		*f.prg = prg
	}
	return n, nil
}

// Spec returns the naming n was compiled from (the zero value for a nil n).
func (n *Naming) Spec() controlv1alpha1.ResourceMappingNaming {
	if n == nil {
		return controlv1alpha1.ResourceMappingNaming{}
	}
	return n.spec
}

// namesNamespace reports whether n gives the copies' target namespace (spec.naming.namespace):
// then one target namespace may hold the copies of several source namespaces.
func (n *Naming) namesNamespace() bool {
	return n != nil && n.namespace != nil
}

// Place returns the target namespace and name of the copy of source object src made by the
// mapper of location. defaultNamespace is the namespace the namespace mapping gives src ("" for
// cluster-scoped objects, which never get a namespace). Without a naming, or without the
// field, the result is defaultNamespace and src.Name. A result of an expression that is not a
// DNS-1123 label is made one (HashedLabel, the hash of the whole result). It fails when an
// evaluation fails (an error, the cost limit, ctx ending) or returns something other than a
// non-empty string: then the object has no place, and nothing may be written or deleted for it.
func (n *Naming) Place(ctx context.Context, location string, src SourceRef, defaultNamespace string) (namespace, name string, err error) {
	namespace, name = defaultNamespace, src.Name
	if n == nil {
		return namespace, name, nil
	}
	vars := map[string]interface{}{
		NamingLocationVar: location,
		NamingSourceVar:   map[string]string{"cluster": src.Cluster, "namespace": src.Namespace, "name": src.Name},
	}
	eval := func(field string, prg cel.Program) (string, error) {
		val, _, err := prg.ContextEval(ctx, vars)
		if err != nil {
			return "", fmt.Errorf("%s: %v", field, err)
		}
		s, ok := val.Value().(string)
		if !ok {
			return "", fmt.Errorf("%s returned %s, not a string", field, val.Type().TypeName())
		}
		if s == "" {
			return "", fmt.Errorf("%s returned an empty string", field)
		}
		return HashedLabel(s, s, "x"), nil
	}
	if n.namespace != nil && defaultNamespace != "" {
		if namespace, err = eval("spec.naming.namespace", n.namespace); err != nil {
			return "", "", err
		}
	}
	if n.name != nil {
		if name, err = eval("spec.naming.name", n.name); err != nil {
			return "", "", err
		}
	}
	return namespace, name, nil
}

// hashedLabelLen is the number of hex digits of SHA-256 appended to a shortened name (40
// bits: a collision needs about a million names per target namespace).
const hashedLabelLen = 10

// HashedLabel returns s when it is a DNS-1123 label (at most 63 lowercase alphanumerics or
// '-', starting and ending with an alphanumeric: a namespace name, and a name every resource
// accepts). Otherwise uppercase letters are lowered, every other character outside [a-z0-9-]
// becomes '-', the result is cut to 52 characters and trimmed of '-', and "-" plus the first
// 10 hex digits of SHA-256(hashOf) is appended: at most 63 characters, stable across restarts
// and mapper versions, and different for different hashOf with overwhelming probability.
// When nothing is left before the hash, emptyPrefix stands in for it. The prefixed namespace
// mapping (TargetNamespace) and spec.naming (Naming.Place) both make their names with it.
func HashedLabel(s, hashOf, emptyPrefix string) string {
	if len(validation.IsDNS1123Label(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(hashOf))
	suffix := hex.EncodeToString(sum[:])[:hashedLabelLen]
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, s)
	maxPrefix := validation.DNS1123LabelMaxLength - 1 - hashedLabelLen
	if len(clean) > maxPrefix {
		clean = clean[:maxPrefix]
	}
	clean = strings.Trim(clean, "-")
	if clean == "" {
		return emptyPrefix + "-" + suffix
	}
	return clean + "-" + suffix
}

// namingCache compiles each spec.naming once: a mapping's projection keeps the same *Naming
// while its naming does not change (resourceMappings compares projections to restart a
// resource whose projection changed). keep drops the entries no mapping uses any more. It is
// safe for concurrent use.
type namingCache struct {
	mu      sync.Mutex
	entries map[controlv1alpha1.ResourceMappingNaming]namingEntry
}

type namingEntry struct {
	naming *Naming
	err    error
}

// compile returns the compiled spec, from the cache when it was compiled before.
func (c *namingCache) compile(spec *controlv1alpha1.ResourceMappingNaming) (*Naming, error) {
	if spec == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[*spec]; ok {
		return e.naming, e.err
	}
	n, err := CompileNaming(spec)
	if c.entries == nil {
		c.entries = map[controlv1alpha1.ResourceMappingNaming]namingEntry{}
	}
	c.entries[*spec] = namingEntry{naming: n, err: err}
	return n, err
}

// keep drops every entry whose spec is not in used.
func (c *namingCache) keep(used map[controlv1alpha1.ResourceMappingNaming]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if !used[k] {
			delete(c.entries, k)
		}
	}
}
