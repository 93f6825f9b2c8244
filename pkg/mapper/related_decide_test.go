package mapper

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

var (
	testSecrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	testWidgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	testGizmos  = schema.GroupVersionResource{Group: "other.example", Version: "v1", Resource: "gizmos"}
)

// testMapping compiles a mapping of widgets onto gizmos with one related entry of origin
// Target for secrets.
func testMapping(t *testing.T, object controlv1alpha1.RelatedObjectReference, name string) *relatedMapping {
	t.Helper()
	e, err := compileRelatedEntry(controlv1alpha1.RelatedResource{
		Identifier: "credentials", Origin: controlv1alpha1.RelatedOriginTarget,
		Resource: controlv1alpha1.GroupVersionResource{Version: "v1", Resource: "secrets"},
		Object:   object, Name: name,
	}, testWidgets, testGizmos)
	if err != nil {
		t.Fatal(err)
	}
	return &relatedMapping{Name: "widgets-as-gizmos", Accepted: true, Entries: []*relatedEntry{e}}
}

func testObj(apiVersion, kind, ns, name string, uid types.UID, fields map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(uid)
	return u
}

// unsynced is the relatedLister of an informer that has not synced.
func unsynced(schema.GroupVersionResource, string) ([]*unstructured.Unstructured, bool) {
	return nil, false
}

// listOf is a relatedLister over objs (synced).
func listOf(objs ...*unstructured.Unstructured) relatedLister {
	return func(gvr schema.GroupVersionResource, ns string) ([]*unstructured.Unstructured, bool) {
		var out []*unstructured.Unstructured
		for _, o := range objs {
			if o.GetNamespace() == ns {
				out = append(out, o)
			}
		}
		return out, true
	}
}

type relatedFixture struct {
	main, copy, secret *unstructured.Unstructured
	mapping            *relatedMapping
}

func newRelatedFixture(t *testing.T) relatedFixture {
	main := testObj("example.com/v1", "Widget", "apps", "w1", "uid-1", nil)
	copy := testObj("other.example/v1", "Gizmo", "tenant-apps", "w1", "", nil)
	secret := testObj("v1", "Secret", "tenant-apps", "w1-credentials", "tuid", map[string]interface{}{
		"type": "Opaque", "data": map[string]interface{}{"password": "c2VjcmV0"},
		"status": map[string]interface{}{"x": "y"},
	})
	secret.SetLabels(map[string]string{"app": "db", contract.LocationLabel: "elsewhere", contract.RelatedLocationLabel: "x"})
	secret.SetAnnotations(map[string]string{"note": "kept", "kubectl.kubernetes.io/last-applied-configuration": "{}"})
	return relatedFixture{main: main, copy: copy, secret: secret,
		mapping: testMapping(t, controlv1alpha1.RelatedObjectReference{Name: `object.metadata.name + "-credentials"`}, "")}
}

func (f relatedFixture) inputs(existing ...*unstructured.Unstructured) relatedInputs {
	in := relatedInputs{Location: "east", Mapping: f.mapping, Main: f.main, Copy: f.copy}
	for _, e := range existing {
		in.Existing = append(in.Existing, relatedObject{Resource: testSecrets, Obj: e})
	}
	return in
}

// TestPlanRelatedCreatesTheCopy: a target Secret found by name for the main object's copy is
// brought up with its data and type, without its status, the target's reserved keys or
// droppedAnnotations, under the default name, with the marks and an ownerReference to the main
// object.
func TestPlanRelatedCreatesTheCopy(t *testing.T) {
	f := newRelatedFixture(t)
	p := planRelated(context.Background(), f.inputs(), listOf(f.secret))
	if len(p.Errors) > 0 || len(p.Deletes) > 0 || len(p.Writes) != 1 {
		t.Fatalf("plan %+v", p)
	}
	w := p.Writes[0]
	got := w.Desired
	if w.Existing != nil || w.Resource != testSecrets {
		t.Errorf("write %+v: want a create of a secret", w)
	}
	if got.GetName() != "w1-credentials-east" || got.GetNamespace() != "apps" || got.GetKind() != "Secret" || got.GetAPIVersion() != "v1" {
		t.Errorf("copy %s %s %s/%s", got.GetAPIVersion(), got.GetKind(), got.GetNamespace(), got.GetName())
	}
	if pw, _, _ := unstructured.NestedString(got.Object, "data", "password"); pw != "c2VjcmV0" || got.Object["type"] != "Opaque" || got.Object["status"] != nil {
		t.Errorf("content %v", got.Object)
	}
	wantLabels := map[string]string{"app": "db", contract.RelatedLocationLabel: "east", contract.RelatedOwnerUIDLabel: "uid-1", contract.RelatedIdentifierLabel: "credentials"}
	if !equalStrings(got.GetLabels(), wantLabels) {
		t.Errorf("labels %v, want %v", got.GetLabels(), wantLabels)
	}
	wantAnn := map[string]string{"note": "kept", contract.RelatedMappingAnnotation: "widgets-as-gizmos"}
	if !equalStrings(got.GetAnnotations(), wantAnn) {
		t.Errorf("annotations %v, want %v", got.GetAnnotations(), wantAnn)
	}
	refs := got.GetOwnerReferences()
	if len(refs) != 1 || refs[0].UID != "uid-1" || refs[0].Name != "w1" || refs[0].Kind != "Widget" || refs[0].APIVersion != "example.com/v1" || refs[0].Controller != nil {
		t.Errorf("ownerReferences %v", refs)
	}
	if Mapped(got) {
		t.Errorf("a related copy is Mapped: the mapper would copy it down onto the target")
	}

	// In step: nothing to do; a changed target Secret is an update.
	if p := planRelated(context.Background(), f.inputs(got), listOf(f.secret)); len(p.Writes)+len(p.Deletes) != 0 {
		t.Errorf("a copy in step is written again: %+v", p)
	}
	changed := f.secret.DeepCopy()
	_ = unstructured.SetNestedField(changed.Object, "bmV3", "data", "password")
	existing := got.DeepCopy()
	existing.SetResourceVersion("7")
	existing.SetAnnotations(map[string]string{contract.RelatedMappingAnnotation: "widgets-as-gizmos", "note": "kept", contract.ClusterAnnotation: "c1"})
	p = planRelated(context.Background(), f.inputs(existing), listOf(changed))
	if len(p.Writes) != 1 || p.Writes[0].Existing != existing || len(p.Deletes) != 0 {
		t.Fatalf("plan %+v: want one update", p)
	}
	upd := relatedUpdate(existing, p.Writes[0].Desired)
	if pw, _, _ := unstructured.NestedString(upd.Object, "data", "password"); pw != "bmV3" || upd.GetResourceVersion() != "7" || upd.GetAnnotations()[contract.ClusterAnnotation] != "c1" {
		t.Errorf("update %v: want the new data, the existing resourceVersion and the view's annotation", upd.Object)
	}
}

// TestPlanRelatedDeletesOnlyOnASyncedFact: every case in which a related copy may have to go,
// with and without the fact that allows its deletion.
func TestPlanRelatedDeletesOnlyOnASyncedFact(t *testing.T) {
	f := newRelatedFixture(t)
	ctx := context.Background()
	existing := planRelated(ctx, f.inputs(), listOf(f.secret)).Writes[0].Desired
	for _, tc := range []struct {
		name   string
		change func(*relatedInputs)
		list   relatedLister
		delete string // "" when nothing may be deleted
		wait   bool
	}{
		{name: "in step", list: listOf(f.secret)},
		{name: "main not in the informer, not confirmed gone", change: func(in *relatedInputs) { in.Main = nil }, list: listOf(f.secret), wait: true},
		{name: "main confirmed gone", change: func(in *relatedInputs) { in.Main, in.MainGone = nil, true }, list: listOf(f.secret), delete: "not in the location's view"},
		{name: "main releasing", change: func(in *relatedInputs) { in.Releasing = true }, list: listOf(f.secret), delete: "deleting for the location"},
		{name: "mapping gone from the view", change: func(in *relatedInputs) { in.Mapping = nil }, list: listOf(f.secret), delete: "no longer in the location's view"},
		{name: "mapping not accepted", change: func(in *relatedInputs) { in.Mapping.Accepted = false; in.Main = nil; in.MainGone = true }, list: listOf()},
		{name: "mapping does not compile", change: func(in *relatedInputs) { in.Mapping.Err = errTest; in.Releasing = true }, list: listOf()},
		{name: "entry removed", change: func(in *relatedInputs) { in.Mapping.Entries = nil }, list: listOf(f.secret), delete: "no longer has its related entry"},
		{name: "earlier main object of that name", change: func(in *relatedInputs) { in.Main = in.Main.DeepCopy(); in.Main.SetUID("uid-2") }, list: listOf(f.secret), delete: "another UID"},
		{name: "no copy on the target", change: func(in *relatedInputs) { in.Copy = nil }, list: listOf()},
		{name: "target informer not synced", list: unsynced, wait: true},
		{name: "target object gone", list: listOf(), delete: "holds no related object"},
		{name: "target object in another namespace only", list: listOf(withNamespace(f.secret, "other")), delete: "holds no related object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRelatedFixture(t)
			in := f.inputs(existing)
			if tc.change != nil {
				tc.change(&in)
			}
			p := planRelated(ctx, in, tc.list)
			if p.Wait != tc.wait {
				t.Errorf("wait %v, want %v", p.Wait, tc.wait)
			}
			switch {
			case tc.delete == "" && len(p.Deletes) > 0:
				t.Errorf("deletes %+v, want none", p.Deletes)
			case tc.delete != "" && (len(p.Deletes) != 1 || !strings.Contains(p.Deletes[0].Reason, tc.delete)):
				t.Errorf("deletes %+v, want one because %q", p.Deletes, tc.delete)
			}
		})
	}
}

var errTest = validationError("bad expression")

type validationError string

func (e validationError) Error() string { return string(e) }

func withNamespace(u *unstructured.Unstructured, ns string) *unstructured.Unstructured {
	u = u.DeepCopy()
	u.SetNamespace(ns)
	return u
}

// TestPlanRelatedExpressionErrorsDeleteNothing: an entry whose expression fails for an
// object writes and deletes nothing of that entry, and says why.
func TestPlanRelatedExpressionErrorsDeleteNothing(t *testing.T) {
	f := newRelatedFixture(t)
	ctx := context.Background()
	existing := planRelated(ctx, f.inputs(), listOf(f.secret)).Writes[0].Desired
	for _, tc := range []struct {
		name          string
		object, copyN string
	}{
		{name: "object.name fails", object: `object.spec.missing`},
		{name: "object.name not a name", object: `"Not A Name"`},
		{name: "name fails", object: `object.metadata.name + "-credentials"`, copyN: `related.metadata.nope`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.mapping = testMapping(t, controlv1alpha1.RelatedObjectReference{Name: tc.object}, tc.copyN)
			p := planRelated(ctx, f.inputs(existing), listOf(f.secret))
			if len(p.Errors) != 1 || len(p.Deletes) != 0 || len(p.Writes) != 0 {
				t.Errorf("plan %+v: want one error, nothing written or deleted", p)
			}
		})
	}
}

// TestPlanRelatedByLabelsAndNameExpression: a label selector with CEL values finds the target
// objects, and the name expression sees object, related, location and identifier.
func TestPlanRelatedByLabelsAndNameExpression(t *testing.T) {
	f := newRelatedFixture(t)
	f.copy.SetLabels(map[string]string{"instance": "w1"})
	f.mapping = testMapping(t, controlv1alpha1.RelatedObjectReference{LabelSelector: map[string]string{"app.kubernetes.io/instance": `object.metadata.labels["instance"]`}},
		`object.metadata.name + "-" + related.metadata.name + "-" + identifier + "-" + location`)
	match := testObj("v1", "ConfigMap", "tenant-apps", "cfg-a", "a", nil)
	match.SetLabels(map[string]string{"app.kubernetes.io/instance": "w1"})
	other := testObj("v1", "ConfigMap", "tenant-apps", "cfg-b", "b", nil)
	other.SetLabels(map[string]string{"app.kubernetes.io/instance": "w2"})
	p := planRelated(context.Background(), f.inputs(), listOf(match, other))
	if len(p.Writes) != 1 || p.Writes[0].Desired.GetName() != "w1-cfg-a-credentials-east" {
		t.Fatalf("plan %+v: want one copy w1-cfg-a-credentials-east", p)
	}
}

// TestRelatedCopyName: a valid name stays, a long or invalid one is made a DNS-1123 label of at
// most 63 characters, the same every time and different for different inputs.
func TestRelatedCopyName(t *testing.T) {
	if got := relatedCopyName("w1-credentials-east"); got != "w1-credentials-east" {
		t.Errorf("valid name changed to %q", got)
	}
	long := strings.Repeat("a", 60) + "-credentials-east"
	a, b := relatedCopyName(long), relatedCopyName(long+"2")
	for _, n := range []string{a, b, relatedCopyName("Upper_Case.Name"), relatedCopyName("---")} {
		if msgs := validation.IsDNS1123Label(n); len(msgs) > 0 {
			t.Errorf("%q is not a valid name: %v", n, msgs)
		}
	}
	if a == b || a != relatedCopyName(long) {
		t.Errorf("names %q %q: want stable and distinct", a, b)
	}
}

// TestCompileRelatedEntryErrors: expressions that do not compile or cannot return a string are
// refused with the field named.
func TestCompileRelatedEntryErrors(t *testing.T) {
	for _, tc := range []struct {
		spec controlv1alpha1.RelatedResource
		want string
	}{
		{controlv1alpha1.RelatedResource{Object: controlv1alpha1.RelatedObjectReference{Name: `object.metadata.name +`}}, "object.name"},
		{controlv1alpha1.RelatedResource{Object: controlv1alpha1.RelatedObjectReference{Name: `1 + 2`}}, "must return a string"},
		{controlv1alpha1.RelatedResource{Object: controlv1alpha1.RelatedObjectReference{Name: `nope.x`}}, "undeclared"},
		{controlv1alpha1.RelatedResource{Object: controlv1alpha1.RelatedObjectReference{LabelSelector: map[string]string{"a": "true"}}}, "labelSelector[a]"},
		{controlv1alpha1.RelatedResource{Object: controlv1alpha1.RelatedObjectReference{Name: `"x"`}, Name: `object.metadata.name + 1`}, "name:"},
	} {
		if _, err := compileRelatedEntry(tc.spec, testWidgets, testGizmos); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %q", tc.spec, err, tc.want)
		}
	}
}

// TestReservedRelatedKeys: the marks of a related copy are never copied onto a target.
func TestReservedRelatedKeys(t *testing.T) {
	obj := testObj("v1", "ConfigMap", "apps", "c", "u", nil)
	obj.SetLabels(map[string]string{contract.RelatedOwnerUIDLabel: "u", "app": "x"})
	obj.SetAnnotations(map[string]string{contract.RelatedMappingAnnotation: "m"})
	out := Transform(obj, TargetObject{Location: "east", Namespace: "apps", Source: SourceRef{Cluster: "c", Namespace: "apps", Name: "c"}})
	if _, ok := out.GetLabels()[contract.RelatedOwnerUIDLabel]; ok {
		t.Errorf("labels %v: a related.kcp.io label was copied", out.GetLabels())
	}
	if _, ok := out.GetAnnotations()[contract.RelatedMappingAnnotation]; ok {
		t.Errorf("annotations %v: a related.kcp.io annotation was copied", out.GetAnnotations())
	}
}

func equalStrings(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
