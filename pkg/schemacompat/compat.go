// Package schemacompat tells whether a target cluster's schema of a resource accepts every
// object its source's schema allows: a conservative subset check over two OpenAPI v3 schemas
// (kube-openapi's spec.Schema, as kube-apiserver publishes a CRD's structural schema under
// /openapi/v3). It answers Compatible only when it can show that every constraint of the target
// is implied by the source's, Incompatible when it finds a value the source allows and the
// target refuses or drops, and Unknown when it cannot tell either (docs/locations.md,
// "Resource compatibility").
package schemacompat

import (
	"fmt"
	"reflect"
	"slices"
	"sort"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Verdict is the answer of Check.
type Verdict int

const (
	// Compatible: every object the source's schema allows, the target's allows as it is.
	Compatible Verdict = iota
	// Unknown: neither shown compatible nor shown incompatible (see Check).
	Unknown
	// Incompatible: some object the source's schema allows is refused by the target's, or
	// loses fields there.
	Incompatible
)

// String returns the verdict's name.
func (v Verdict) String() string {
	switch v {
	case Compatible:
		return "Compatible"
	case Incompatible:
		return "Incompatible"
	}
	return "Unknown"
}

// Finding is one reason for a verdict other than Compatible, at one place of the schema.
type Finding struct {
	// Verdict is Incompatible or Unknown.
	Verdict Verdict
	// Path is where in the object, in JSONPath-like form: ".spec.name", ".spec.ports[*]",
	// ".metadata.labels[*]" for map values, "" for the root.
	Path string
	// Message says what differs ("maxLength 8 < 64 in the source").
	Message string
}

// String returns "<path>: <message>", the path "." for the root.
func (f Finding) String() string {
	p := f.Path
	if p == "" {
		p = "."
	}
	return p + ": " + f.Message
}

// Result is the verdict of Check and the findings behind it, Incompatible ones first, each
// group in path order.
type Result struct {
	Verdict  Verdict
	Findings []Finding
}

// Check compares the schema src of a resource in the source with the schema tgt of the same
// group, version and kind on a target, and reports whether tgt accepts every object src
// allows. The rules (a conservative subset check; docs/locations.md, "Resource compatibility"):
//   - type: tgt's must be absent or src's; x-kubernetes-int-or-string and nullable on src
//     need them on tgt;
//   - enum: src's values must all be in tgt's (src without enum against a tgt with one is
//     Incompatible);
//   - bounds: tgt's maxLength, maxItems, maxProperties and maximum must not be below src's
//     (absent on src is unbounded), and its minLength, minItems, minProperties and minimum not
//     above src's; exclusiveMaximum/Minimum count as narrower at the same bound; tgt's
//     uniqueItems needs src's;
//   - required: tgt may require only what src requires;
//   - properties: each of src's properties is compared with tgt's; one that tgt does not
//     declare is Incompatible unless tgt keeps unknown fields
//     (x-kubernetes-preserve-unknown-fields, additionalProperties), since the target would
//     prune it; one that tgt declares and src does not is Unknown when src keeps unknown
//     fields (src may carry any value there), unless tgt's schema of it accepts anything;
//   - items and additionalProperties schemas are compared the same way;
//   - what cannot be compared by value is Unknown when tgt's differs from src's: pattern,
//     format, multipleOf, allOf/anyOf/oneOf/not, x-kubernetes-validations (CEL), $ref.
//
// A nil tgt with a non-nil src is Incompatible (the target does not declare the kind); a nil
// src is Unknown. Check does not resolve $ref: the same reference on both sides (a built-in
// type such as ObjectMeta) is taken as compatible. It never fails; at most maxFindings
// findings are kept.
func Check(src, tgt *spec.Schema) Result {
	c := &checker{}
	switch {
	case src == nil:
		c.add(Unknown, "", "the source's schema cannot be read")
	case tgt == nil:
		c.add(Incompatible, "", "the target declares no schema of the kind")
	default:
		c.compare("", src, tgt)
	}
	return c.result()
}

// maxFindings is how many findings a Result keeps.
const maxFindings = 32

// checker collects findings.
type checker struct {
	findings []Finding
}

func (c *checker) add(v Verdict, path, format string, args ...interface{}) {
	c.findings = append(c.findings, Finding{Verdict: v, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) result() Result {
	sort.SliceStable(c.findings, func(i, j int) bool {
		a, b := c.findings[i], c.findings[j]
		if a.Verdict != b.Verdict {
			return a.Verdict > b.Verdict
		}
		return a.Path < b.Path
	})
	r := Result{Verdict: Compatible, Findings: c.findings[:min(len(c.findings), maxFindings)]}
	for _, f := range c.findings {
		r.Verdict = max(r.Verdict, f.Verdict)
	}
	return r
}

// Extension names of kube-apiserver's structural schemas (k8s.io/apiextensions-apiserver).
const (
	extPreserveUnknown = "x-kubernetes-preserve-unknown-fields"
	extIntOrString     = "x-kubernetes-int-or-string"
	extValidations     = "x-kubernetes-validations"
	extEmbedded        = "x-kubernetes-embedded-resource"
)

// compare adds the findings of tgt against src at path.
func (c *checker) compare(path string, src, tgt *spec.Schema) {
	if src.Ref.String() != "" || tgt.Ref.String() != "" {
		if src.Ref.String() != tgt.Ref.String() {
			c.add(Unknown, path, "references differ (%q in the source, %q on the target)", src.Ref.String(), tgt.Ref.String())
		}
		return
	}
	c.compareType(path, src, tgt)
	c.compareEnum(path, src, tgt)
	c.compareBounds(path, src, tgt)
	c.compareOpaque(path, src, tgt)
	for _, r := range tgt.Required {
		if !slices.Contains(src.Required, r) {
			c.add(Incompatible, path, "requires %q, which the source does not", r)
		}
	}
	c.compareProperties(path, src, tgt)
	c.compareItems(path, src, tgt)
}

func (c *checker) compareType(path string, src, tgt *spec.Schema) {
	switch {
	case flag(src, extIntOrString):
		if !flag(tgt, extIntOrString) && len(tgt.Type) > 0 {
			c.add(Incompatible, path, "an integer or string in the source, not on the target (x-kubernetes-int-or-string)")
		}
	case len(tgt.Type) > 0 && !reflect.DeepEqual([]string(src.Type), []string(tgt.Type)):
		c.add(Incompatible, path, "type %v on the target, %v in the source", []string(tgt.Type), []string(src.Type))
	}
	if src.Nullable && !tgt.Nullable {
		c.add(Incompatible, path, "nullable in the source, not on the target")
	}
	if flag(src, extEmbedded) != flag(tgt, extEmbedded) {
		c.add(Incompatible, path, "x-kubernetes-embedded-resource differs")
	}
}

func (c *checker) compareEnum(path string, src, tgt *spec.Schema) {
	if len(tgt.Enum) == 0 {
		return
	}
	if len(src.Enum) == 0 {
		c.add(Incompatible, path, "the target allows only %v, the source any value", tgt.Enum)
		return
	}
	for _, v := range src.Enum {
		if !slices.ContainsFunc(tgt.Enum, func(w interface{}) bool { return reflect.DeepEqual(v, w) }) {
			c.add(Incompatible, path, "the source allows %v, the target does not (enum)", v)
		}
	}
}

func (c *checker) compareBounds(path string, src, tgt *spec.Schema) {
	upper := func(name string, s, t *int64) {
		if t != nil && (s == nil || *s > *t) {
			c.add(Incompatible, path, "%s %d on the target, %s in the source", name, *t, bound(s))
		}
	}
	lower := func(name string, s, t *int64) {
		if t != nil && *t > 0 && (s == nil || *s < *t) {
			c.add(Incompatible, path, "%s %d on the target, %s in the source", name, *t, bound(s))
		}
	}
	upper("maxLength", src.MaxLength, tgt.MaxLength)
	upper("maxItems", src.MaxItems, tgt.MaxItems)
	upper("maxProperties", src.MaxProperties, tgt.MaxProperties)
	lower("minLength", src.MinLength, tgt.MinLength)
	lower("minItems", src.MinItems, tgt.MinItems)
	lower("minProperties", src.MinProperties, tgt.MinProperties)
	if t := tgt.Maximum; t != nil {
		s := src.Maximum
		if s == nil || *s > *t || (*s == *t && tgt.ExclusiveMaximum && !src.ExclusiveMaximum) {
			c.add(Incompatible, path, "maximum %v%s on the target, %s in the source", *t, exclusive(tgt.ExclusiveMaximum), fbound(s, src.ExclusiveMaximum))
		}
	}
	if t := tgt.Minimum; t != nil {
		s := src.Minimum
		if s == nil || *s < *t || (*s == *t && tgt.ExclusiveMinimum && !src.ExclusiveMinimum) {
			c.add(Incompatible, path, "minimum %v%s on the target, %s in the source", *t, exclusive(tgt.ExclusiveMinimum), fbound(s, src.ExclusiveMinimum))
		}
	}
	if tgt.UniqueItems && !src.UniqueItems {
		c.add(Incompatible, path, "uniqueItems on the target, not in the source")
	}
}

// compareOpaque reports, as Unknown, constraints of tgt that cannot be compared by value and
// differ from src's.
func (c *checker) compareOpaque(path string, src, tgt *spec.Schema) {
	if tgt.Pattern != "" && tgt.Pattern != src.Pattern {
		c.add(Unknown, path, "pattern %q on the target, %q in the source", tgt.Pattern, src.Pattern)
	}
	if tgt.Format != "" && tgt.Format != src.Format {
		c.add(Unknown, path, "format %q on the target, %q in the source", tgt.Format, src.Format)
	}
	if tgt.MultipleOf != nil && (src.MultipleOf == nil || *src.MultipleOf != *tgt.MultipleOf) {
		c.add(Unknown, path, "multipleOf %v on the target", *tgt.MultipleOf)
	}
	for name, t := range map[string]interface{}{"allOf": tgt.AllOf, "anyOf": tgt.AnyOf, "oneOf": tgt.OneOf} {
		s := map[string]interface{}{"allOf": src.AllOf, "anyOf": src.AnyOf, "oneOf": src.OneOf}[name]
		if reflect.ValueOf(t).Len() > 0 && !reflect.DeepEqual(s, t) {
			c.add(Unknown, path, "%s differs", name)
		}
	}
	if tgt.Not != nil && !reflect.DeepEqual(src.Not, tgt.Not) {
		c.add(Unknown, path, "not differs")
	}
	if t, ok := tgt.Extensions[extValidations]; ok && !reflect.DeepEqual(src.Extensions[extValidations], t) {
		c.add(Unknown, path, "x-kubernetes-validations (CEL rules) differ")
	}
}

func (c *checker) compareProperties(path string, src, tgt *spec.Schema) {
	for _, name := range sortedKeys(src.Properties) {
		s := src.Properties[name]
		if t, ok := tgt.Properties[name]; ok {
			c.compare(path+"."+name, &s, &t)
			continue
		}
		if t := additional(tgt); t != nil {
			c.compare(path+"."+name, &s, t)
			continue
		}
		if !keepsUnknown(tgt) && (len(tgt.Properties) > 0 || isObject(tgt)) {
			c.add(Incompatible, path+"."+name, "not declared on the target, which drops it")
		}
	}
	if s := additional(src); s != nil {
		if t := additional(tgt); t != nil {
			c.compare(path+"[*]", s, t)
		} else if !keepsUnknown(tgt) && isObject(tgt) {
			c.add(Incompatible, path+"[*]", "a map in the source; the target drops its entries")
		}
	}
	for _, name := range sortedKeys(tgt.Properties) {
		if _, ok := src.Properties[name]; ok {
			continue
		}
		t := tgt.Properties[name]
		switch {
		case keepsUnknown(src) && !acceptsAnything(&t):
			c.add(Unknown, path+"."+name, "declared on the target only, while the source keeps unknown fields there")
		case additional(src) != nil:
			s := additional(src)
			c.compare(path+"."+name, s, &t)
		}
	}
}

func (c *checker) compareItems(path string, src, tgt *spec.Schema) {
	if tgt.Items == nil {
		return
	}
	t := tgt.Items.Schema
	if t == nil || len(tgt.Items.Schemas) > 0 {
		c.add(Unknown, path+"[*]", "tuple items on the target")
		return
	}
	if src.Items == nil || src.Items.Schema == nil {
		if !acceptsAnything(t) {
			c.add(Unknown, path+"[*]", "items constrained on the target only")
		}
		return
	}
	c.compare(path+"[*]", src.Items.Schema, t)
}

// additional returns the schema of a map's values (additionalProperties with a schema), nil
// when there is none; additionalProperties: true is an empty schema.
func additional(s *spec.Schema) *spec.Schema {
	if s.AdditionalProperties == nil || !s.AdditionalProperties.Allows {
		return nil
	}
	if s.AdditionalProperties.Schema == nil {
		return &spec.Schema{}
	}
	return s.AdditionalProperties.Schema
}

// keepsUnknown reports whether s keeps fields it does not declare.
func keepsUnknown(s *spec.Schema) bool {
	return flag(s, extPreserveUnknown) || additional(s) != nil
}

// isObject reports whether s is of type object.
func isObject(s *spec.Schema) bool {
	return slices.Contains([]string(s.Type), "object")
}

// acceptsAnything reports whether s constrains nothing (an empty schema, or only
// x-kubernetes-preserve-unknown-fields).
func acceptsAnything(s *spec.Schema) bool {
	probe := spec.Schema{SchemaProps: s.SchemaProps, SwaggerSchemaProps: s.SwaggerSchemaProps}
	probe.Description, probe.Title, probe.Default, probe.Example = "", "", nil, nil
	if !reflect.DeepEqual(probe, spec.Schema{}) {
		return false
	}
	for k := range s.Extensions {
		if k != extPreserveUnknown {
			return false
		}
	}
	return true
}

func flag(s *spec.Schema, name string) bool {
	v, _ := s.Extensions.GetBool(name)
	return v
}

func bound(v *int64) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprint(*v)
}

func fbound(v *float64, excl bool) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprint(*v) + exclusive(excl)
}

func exclusive(excl bool) string {
	if excl {
		return " (exclusive)"
	}
	return ""
}

func sortedKeys(m map[string]spec.Schema) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
