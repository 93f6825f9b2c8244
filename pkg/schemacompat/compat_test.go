package schemacompat

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

func schema(t *testing.T, js string) *spec.Schema {
	t.Helper()
	s := &spec.Schema{}
	if err := json.Unmarshal([]byte(js), s); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return s
}

// TestCheck: each rule of Check, with the verdict and the finding that names it.
func TestCheck(t *testing.T) {
	const name = `{"type":"object","properties":{"spec":{"type":"object","properties":{"name":{"type":"string","maxLength":64}}}}}`
	for _, tc := range []struct {
		name     string
		src, tgt string
		want     Verdict
		finding  string // a substring of the first finding's String()
	}{
		{"identical", name, name, Compatible, ""},
		{"narrower maxLength", name, strings.Replace(name, "64", "8", 1), Incompatible, ".spec.name: maxLength 8 on the target, 64 in the source"},
		{"wider maxLength", name, strings.Replace(name, "64", "128", 1), Compatible, ""},
		{"maxLength on the target only", `{"type":"string"}`, `{"type":"string","maxLength":3}`, Incompatible, ".: maxLength 3 on the target, none in the source"},
		{"maxLength in the source only", `{"type":"string","maxLength":3}`, `{"type":"string"}`, Compatible, ""},
		{"higher minLength", `{"type":"string","minLength":1}`, `{"type":"string","minLength":2}`, Incompatible, "minLength 2"},
		{"minLength 0 on the target", `{"type":"string"}`, `{"type":"string","minLength":0}`, Compatible, ""},
		{"narrower maxItems", `{"type":"array","maxItems":5,"items":{"type":"string"}}`, `{"type":"array","maxItems":4,"items":{"type":"string"}}`, Incompatible, "maxItems 4"},
		{"narrower maxProperties", `{"type":"object","additionalProperties":{"type":"string"}}`, `{"type":"object","maxProperties":2,"additionalProperties":{"type":"string"}}`, Incompatible, "maxProperties 2"},
		{"narrower maximum", `{"type":"integer","maximum":100}`, `{"type":"integer","maximum":10}`, Incompatible, "maximum 10 on the target, 100 in the source"},
		{"same maximum, exclusive on the target", `{"type":"integer","maximum":10}`, `{"type":"integer","maximum":10,"exclusiveMaximum":true}`, Incompatible, "(exclusive)"},
		{"same maximum, exclusive in the source", `{"type":"integer","maximum":10,"exclusiveMaximum":true}`, `{"type":"integer","maximum":10}`, Compatible, ""},
		{"higher minimum", `{"type":"number","minimum":0}`, `{"type":"number","minimum":0.5}`, Incompatible, "minimum 0.5"},
		{"lower minimum", `{"type":"number","minimum":1}`, `{"type":"number","minimum":0}`, Compatible, ""},
		{"uniqueItems on the target", `{"type":"array","items":{"type":"string"}}`, `{"type":"array","uniqueItems":true,"items":{"type":"string"}}`, Incompatible, "uniqueItems"},
		{"another type", `{"type":"string"}`, `{"type":"integer"}`, Incompatible, "type [integer] on the target, [string] in the source"},
		{"no type on the target", `{"type":"string"}`, `{}`, Compatible, ""},
		{"int-or-string lost", `{"x-kubernetes-int-or-string":true}`, `{"type":"string"}`, Incompatible, "x-kubernetes-int-or-string"},
		{"nullable lost", `{"type":"string","nullable":true}`, `{"type":"string"}`, Incompatible, "nullable"},
		{"enum subset", `{"type":"string","enum":["a","b"]}`, `{"type":"string","enum":["a","b","c"]}`, Compatible, ""},
		{"enum narrower", `{"type":"string","enum":["a","b"]}`, `{"type":"string","enum":["a"]}`, Incompatible, "the source allows b"},
		{"enum on the target only", `{"type":"string"}`, `{"type":"string","enum":["a"]}`, Incompatible, "allows only [a]"},
		{"extra required", `{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","required":["a"],"properties":{"a":{"type":"string"}}}`, Incompatible, `requires "a"`},
		{"fewer required", `{"type":"object","required":["a"],"properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"a":{"type":"string"}}}`, Compatible, ""},
		{"a field the target drops", `{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"b":{"type":"string"}}}`, Incompatible, ".a: not declared on the target, which drops it"},
		{"a field the target keeps as unknown", `{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`, Compatible, ""},
		{"a field the target declares, the source keeps as unknown", `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`, `{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"a":{"type":"string"}}}`, Unknown, ".a: declared on the target only"},
		{"an unconstrained field the target declares", `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`, `{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"a":{"x-kubernetes-preserve-unknown-fields":true}}}`, Compatible, ""},
		{"map values", `{"type":"object","additionalProperties":{"type":"string","maxLength":10}}`, `{"type":"object","additionalProperties":{"type":"string","maxLength":5}}`, Incompatible, "[*]: maxLength 5"},
		{"a map the target drops", `{"type":"object","additionalProperties":{"type":"string"}}`, `{"type":"object"}`, Incompatible, "the target drops its entries"},
		{"a property against map values", `{"type":"object","properties":{"a":{"type":"string","maxLength":10}}}`, `{"type":"object","additionalProperties":{"type":"string","maxLength":5}}`, Incompatible, ".a: maxLength 5"},
		{"array items", `{"type":"array","items":{"type":"object","properties":{"port":{"type":"integer","maximum":65535}}}}`, `{"type":"array","items":{"type":"object","properties":{"port":{"type":"integer","maximum":1024}}}}`, Incompatible, "[*].port: maximum 1024"},
		{"items on the target only", `{"type":"array"}`, `{"type":"array","items":{"type":"string"}}`, Unknown, "[*]: items constrained on the target only"},
		{"pattern differs", `{"type":"string","pattern":"^a"}`, `{"type":"string","pattern":"^b"}`, Unknown, "pattern"},
		{"pattern same", `{"type":"string","pattern":"^a"}`, `{"type":"string","pattern":"^a"}`, Compatible, ""},
		{"format differs", `{"type":"string"}`, `{"type":"string","format":"date-time"}`, Unknown, "format"},
		{"CEL rules differ", `{"type":"string"}`, `{"type":"string","x-kubernetes-validations":[{"rule":"self != 'x'"}]}`, Unknown, "x-kubernetes-validations"},
		{"CEL rules same", `{"type":"string","x-kubernetes-validations":[{"rule":"self != 'x'"}]}`, `{"type":"string","x-kubernetes-validations":[{"rule":"self != 'x'"}]}`, Compatible, ""},
		{"anyOf on the target", `{"type":"string"}`, `{"type":"string","anyOf":[{"maxLength":1}]}`, Unknown, "anyOf differs"},
		{"same reference", `{"$ref":"#/components/schemas/io.k8s.ObjectMeta"}`, `{"$ref":"#/components/schemas/io.k8s.ObjectMeta"}`, Compatible, ""},
		{"other reference", `{"$ref":"#/components/schemas/a"}`, `{"$ref":"#/components/schemas/b"}`, Unknown, "references differ"},
		{"incompatible beats unknown", `{"type":"object","properties":{"a":{"type":"string","maxLength":2},"b":{"type":"string"}}}`, `{"type":"object","properties":{"a":{"type":"string","maxLength":1},"b":{"type":"string","pattern":"x"}}}`, Incompatible, ".a: maxLength 1"},
	} {
		r := Check(schema(t, tc.src), schema(t, tc.tgt))
		if r.Verdict != tc.want {
			t.Errorf("%s: %s %v, want %s", tc.name, r.Verdict, r.Findings, tc.want)
			continue
		}
		if tc.want == Compatible {
			if len(r.Findings) != 0 {
				t.Errorf("%s: findings %v on a compatible schema", tc.name, r.Findings)
			}
			continue
		}
		if len(r.Findings) == 0 || !strings.Contains(r.Findings[0].String(), tc.finding) {
			t.Errorf("%s: findings %v, want the first to contain %q", tc.name, r.Findings, tc.finding)
		}
	}
}

// TestCheckMissing: a target without the kind's schema is Incompatible, a source without one
// Unknown.
func TestCheckMissing(t *testing.T) {
	s := schema(t, `{"type":"object"}`)
	if r := Check(s, nil); r.Verdict != Incompatible {
		t.Errorf("no target schema: %s", r.Verdict)
	}
	if r := Check(nil, s); r.Verdict != Unknown {
		t.Errorf("no source schema: %s", r.Verdict)
	}
}

// TestCheckCapsFindings: a schema with many differences keeps maxFindings findings, the
// incompatible ones first.
func TestCheckCapsFindings(t *testing.T) {
	src, tgt := &spec.Schema{}, &spec.Schema{}
	src.Type, tgt.Type = spec.StringOrArray{"object"}, spec.StringOrArray{"object"}
	src.Properties, tgt.Properties = map[string]spec.Schema{}, map[string]spec.Schema{}
	for i := range 50 {
		n := string(rune('a'+i%26)) + string(rune('a'+i/26))
		src.Properties[n] = *spec.StringProperty()
		tgt.Properties[n] = *spec.StringProperty().WithPattern("x")
	}
	tgt.Properties["zz"] = *spec.Int64Property()
	src.Properties["zz"] = *spec.StringProperty()
	r := Check(src, tgt)
	if r.Verdict != Incompatible || len(r.Findings) != maxFindings || r.Findings[0].Path != ".zz" {
		t.Errorf("%s, %d findings, first %v", r.Verdict, len(r.Findings), r.Findings[0])
	}
}
