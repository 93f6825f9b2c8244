package rendercheck

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// object is a ConfigMap as a location's view renders it: identity, version, lifecycle,
// marks, and one location's status.
func object() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{
			"name": "web", "namespace": "tenant-a", "uid": "u-1", "resourceVersion": "42", "generation": int64(3),
			"creationTimestamp": "2025-01-01T00:00:00Z",
			"ownerReferences":   []interface{}{map[string]interface{}{"apiVersion": "v1", "kind": "Secret", "name": "owner", "uid": "u-0"}},
			"finalizers":        []interface{}{"locations.mapper.kcp.io/east"},
			"labels":            map[string]interface{}{"app": "web", "kcp.io/location": "east", "team.kcp.io/owner": "a"},
			"annotations": map[string]interface{}{
				"kcp.io/cluster": "default", "kcp.io/assigned-locations": `["east"]`, "example.com/note": "x",
				"spec-diff.kcp.io/east": `[]`,
			},
		},
		"data":   map[string]interface{}{"k": "v"},
		"status": map[string]interface{}{"replicas": float64(1)},
	}}
}

// TestIsMark: kcp.io and *.kcp.io prefixes, in any case; not a look-alike, not a key without prefix.
func TestIsMark(t *testing.T) {
	for key, want := range map[string]bool{
		"kcp.io/cluster": true, "status.kcp.io/east": true, "spec-diff.kcp.io/east": true, "outcome.kcp.io/west": true,
		"KCP.IO/location": true, "a.b.Kcp.Io/x": true,
		"kcp.io": false, "notkcp.io/x": false, "kcp.io.example.com/x": false, "example.com/kcp.io": false, ".kcp.io/x": true,
		"app": false, "": false,
	} {
		if got := IsMark(key); got != want {
			t.Errorf("IsMark(%q) = %v, want %v", key, got, want)
		}
	}
}

// TestModifiesProtected: every protected field, anything below one, every ancestor of one, and
// every mark key (JSON pointer escapes decoded as the patch library decodes them) is refused;
// the rest of the object, including other labels and annotations, is not.
func TestModifiesProtected(t *testing.T) {
	refused := map[string]string{
		"":                                      "",
		"/apiVersion":                           "/apiVersion",
		"/kind":                                 "/kind",
		"/status":                               "/status",
		"/status/replicas":                      "/status",
		"/metadata":                             "/metadata",
		"/metadata/name":                        "/metadata/name",
		"/metadata/namespace":                   "/metadata/namespace",
		"/metadata/uid":                         "/metadata/uid",
		"/metadata/resourceVersion":             "/metadata/resourceVersion",
		"/metadata/generation":                  "/metadata/generation",
		"/metadata/creationTimestamp":           "/metadata/creationTimestamp",
		"/metadata/deletionTimestamp":           "/metadata/deletionTimestamp",
		"/metadata/deletionGracePeriodSeconds":  "/metadata/deletionGracePeriodSeconds",
		"/metadata/ownerReferences":             "/metadata/ownerReferences",
		"/metadata/ownerReferences/0/name":      "/metadata/ownerReferences",
		"/metadata/finalizers":                  "/metadata/finalizers",
		"/metadata/finalizers/-":                "/metadata/finalizers",
		"/metadata/managedFields":               "/metadata/managedFields",
		"/metadata/labels":                      "/metadata/labels",
		"/metadata/annotations":                 "/metadata/annotations",
		"/metadata/labels/kcp.io~1location":     "/metadata/labels/kcp.io~1location",
		"/metadata/labels/KCP.io~1location":     "/metadata/labels/KCP.io~1location",
		"/metadata/labels/team.kcp.io~1x":       "/metadata/labels/team.kcp.io~1x",
		"/metadata/annotations/kcp.io~1cluster": "/metadata/annotations/kcp.io~1cluster",
		"/metadata/annotations/kcp.io~1assigned-locations": "/metadata/annotations/kcp.io~1assigned-locations",
		"/metadata/annotations/status.kcp.io~1east":        "/metadata/annotations/status.kcp.io~1east",
		"/metadata/annotations/spec-diff.kcp.io~1west":     "/metadata/annotations/spec-diff.kcp.io~1west",
		"/metadata/annotations/kcp.io~1cluster/deeper":     "/metadata/annotations/kcp.io~1cluster",
		"/metadata/annotations/outcome.kcp.io~1east":       "/metadata/annotations/outcome.kcp.io~1east",
	}
	for ptr, want := range refused {
		got, ok := ModifiesProtected(ptr)
		if !ok || got != want {
			t.Errorf("ModifiesProtected(%q) = %q, %v; want %q, true", ptr, got, ok, want)
		}
	}
	for _, ptr := range []string{
		"/data", "/data/k", "/spec/replicas", "/metadata/labels/app", "/metadata/annotations/example.com~1note",
		"/metadata/labels/kcp.io",           // no prefix: not a mark
		"/metadata/labels/kcp.io~0location", // "kcp.io~location": no "/"
		"/metadata/generateName", "/metadataX", "/statusX",
		"metadata/name", // no leading "/": the patch library reads the top-level field "name"
	} {
		if got, ok := ModifiesProtected(ptr); ok {
			t.Errorf("ModifiesProtected(%q) = %q, true; want false", ptr, got)
		}
	}
}

// TestChanged: an unchanged rendering (and one whose numbers changed type only, or that
// consumed its spec-diff.kcp.io/ annotations) passes; every change of a protected field or a
// mark is named by its pointer; other changes pass.
func TestChanged(t *testing.T) {
	before := object()
	if p, changed := Changed(before, before.DeepCopy()); changed {
		t.Fatalf("unchanged: %s", p)
	}
	for _, tc := range []struct {
		want   string
		change func(m map[string]interface{}, meta map[string]interface{})
	}{
		{"", func(m, _ map[string]interface{}) { m["status"] = map[string]interface{}{"replicas": int64(1)} }},
		{"", func(_, meta map[string]interface{}) {
			delete(meta["annotations"].(map[string]interface{}), "spec-diff.kcp.io/east")
		}},
		{"", func(m, meta map[string]interface{}) {
			m["data"] = map[string]interface{}{"other": "x"}
			meta["labels"].(map[string]interface{})["app"] = "other"
			meta["annotations"].(map[string]interface{})["example.com/new"] = "y"
		}},
		{"/apiVersion", func(m, _ map[string]interface{}) { m["apiVersion"] = "v2" }},
		{"/kind", func(m, _ map[string]interface{}) { delete(m, "kind") }},
		{"/status", func(m, _ map[string]interface{}) { m["status"] = map[string]interface{}{"replicas": int64(2)} }},
		{"/metadata/name", func(_, meta map[string]interface{}) { meta["name"] = "victim" }},
		{"/metadata/namespace", func(_, meta map[string]interface{}) { meta["namespace"] = "tenant-b" }},
		{"/metadata/uid", func(_, meta map[string]interface{}) { delete(meta, "uid") }},
		{"/metadata/resourceVersion", func(_, meta map[string]interface{}) { meta["resourceVersion"] = "1" }},
		{"/metadata/generation", func(_, meta map[string]interface{}) { meta["generation"] = int64(4) }},
		{"/metadata/creationTimestamp", func(_, meta map[string]interface{}) { meta["creationTimestamp"] = nil }},
		{"/metadata/deletionTimestamp", func(_, meta map[string]interface{}) { meta["deletionTimestamp"] = "2025-01-02T00:00:00Z" }},
		{"/metadata/ownerReferences", func(_, meta map[string]interface{}) { meta["ownerReferences"] = []interface{}{} }},
		{"/metadata/finalizers", func(_, meta map[string]interface{}) {
			meta["finalizers"] = []interface{}{"locations.mapper.kcp.io/east", "x"}
		}},
		{"/metadata/managedFields", func(_, meta map[string]interface{}) { meta["managedFields"] = []interface{}{} }},
		{"/metadata/labels/kcp.io~1location", func(_, meta map[string]interface{}) {
			meta["labels"].(map[string]interface{})["kcp.io/location"] = "west"
		}},
		{"/metadata/labels/team.kcp.io~1owner", func(_, meta map[string]interface{}) {
			meta["labels"] = map[string]interface{}{"app": "web", "kcp.io/location": "east"}
		}},
		{"/metadata/labels/new.kcp.io~1x", func(_, meta map[string]interface{}) {
			meta["labels"].(map[string]interface{})["new.kcp.io/x"] = "1"
		}},
		{"/metadata/annotations/kcp.io~1cluster", func(_, meta map[string]interface{}) { meta["annotations"] = "garbage" }},
		{"/metadata/annotations/status.kcp.io~1west", func(_, meta map[string]interface{}) {
			meta["annotations"].(map[string]interface{})["status.kcp.io/west"] = "{}"
		}},
	} {
		after := before.DeepCopy()
		tc.change(after.Object, after.Object["metadata"].(map[string]interface{}))
		p, changed := Changed(before, after)
		if p != tc.want || changed != (tc.want != "") {
			t.Errorf("want %q, got %q (changed %v)", tc.want, p, changed)
		}
	}
	// Replacing the whole metadata, even keeping name and namespace, is found.
	after := before.DeepCopy()
	after.Object["metadata"] = map[string]interface{}{"name": "web", "namespace": "tenant-a"}
	if p, changed := Changed(before, after); !changed {
		t.Error("a replaced metadata passed")
	} else {
		t.Logf("a replaced metadata: %s", p)
	}
}

// TestCheck: a refusal says why, and holds nothing of the rendering.
func TestCheck(t *testing.T) {
	before := object()
	after := before.DeepCopy()
	after.SetNamespace("tenant-b")
	err := Check(before, after, 0)
	r, ok := err.(*Refusal)
	if !ok || r.Reason != ReasonProtectedFieldChanged || r.Path != "/metadata/namespace" || !strings.Contains(err.Error(), "/metadata/namespace") {
		t.Errorf("Check = %v, want a refusal of /metadata/namespace", err)
	}
	after = before.DeepCopy()
	after.Object["data"] = map[string]interface{}{"k": strings.Repeat("x", 4096)}
	err = Check(before, after, 1024)
	if r, ok := err.(*Refusal); !ok || r.Reason != ReasonTooLarge || r.Limit != 1024 || r.Size <= 1024 || !strings.Contains(err.Error(), "1024") {
		t.Errorf("Check = %v, want a refusal over 1024 bytes", err)
	}
	if err := Check(before, after, -1); err != nil {
		t.Errorf("no bound: %v", err)
	}
	if err := Check(before, before.DeepCopy(), 0); err != nil {
		t.Errorf("unchanged: %v", err)
	}
}

// TestTooLargeCountsAsEncodingJSON: the walk counts exactly what encoding/json writes, for
// escapes, invalid UTF-8, numbers of every form and nesting; the bound is exclusive.
func TestTooLargeCountsAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	strs := []string{"", "plain", `quo"te\back`, "tab\tnl\ncr\rbs\bff\f", "\x00\x1f", "<a>&", "é日本", "\u2028\u2029", "bad\xffutf8\xc3"}
	nums := []interface{}{int64(0), int64(-7), int64(1 << 62), 0.5, -1e-7, 1e-6, 123456789.125, 1e21, 1e20, 3.0, float64(1 << 60), 1e-300, int64(42)}
	var gen func(depth int) interface{}
	gen = func(depth int) interface{} {
		switch k := r.Intn(7); {
		case depth > 3 || k == 0:
			return strs[r.Intn(len(strs))]
		case k == 1:
			return nums[r.Intn(len(nums))]
		case k == 2:
			return r.Intn(2) == 0
		case k == 3:
			return nil
		case k == 4:
			l := make([]interface{}, r.Intn(4))
			for i := range l {
				l[i] = gen(depth + 1)
			}
			return l
		default:
			m := map[string]interface{}{}
			for i := r.Intn(4); i > 0; i-- {
				m[strs[r.Intn(len(strs))]+string(rune('a'+i))] = gen(depth + 1)
			}
			return m
		}
	}
	for i := 0; i < 500; i++ {
		obj := map[string]interface{}{"x": gen(0), "y": gen(0)}
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if rf := TooLarge(u, int64(len(b))); rf != nil {
			t.Fatalf("%s: %d bytes refused at a bound of %d (counted %d)", b, len(b), len(b), rf.Size)
		}
		if rf := TooLarge(u, int64(len(b))-1); rf == nil {
			t.Fatalf("%s: %d bytes not refused at a bound of %d", b, len(b), len(b)-1)
		}
	}
}

// BenchmarkTooLarge: the walk of a 1 MiB ConfigMap, allocation-free.
func BenchmarkTooLarge(b *testing.B) {
	data := map[string]interface{}{}
	for i := 0; i < 1024; i++ {
		data[strings.Repeat("k", 8)+string(rune('a'+i%26))+string(rune('a'+i/26))] = strings.Repeat("v", 1000)
	}
	u := object()
	u.Object["data"] = data
	b.ReportAllocs()
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if TooLarge(u, 0) != nil {
			b.Fatal("refused")
		}
	}
}

// BenchmarkChanged: the comparison of a rendering with its input (a view's ConfigMap with
// owners, finalizers, marks and a status), as every rendering step runs it.
func BenchmarkChanged(b *testing.B) {
	before, after := object(), object()
	after.Object["data"] = map[string]interface{}{"k": "changed"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, changed := Changed(before, after); changed {
			b.Fatal("changed")
		}
	}
}
