package cache

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
	"github.com/cluster-mapper/cluster-mapper/pkg/rendercheck"
)

// hijack is a hostile spec-diff patch: it moves its object into
// another tenant's namespace, under the name of that tenant's object.
const hijack = `[{"op":"replace","path":"/metadata","value":{"name":"victim","namespace":"tenant-b"}}]`

// TestHijackingPatchIsRefused (docs/customization.md, "What a rendering may not change"): a patch that replaces /metadata is
// refused; the location's view never shows the object under another namespace or name; a
// version never shown is withheld (a GET answers 503 saying why), a version shown before
// keeps its last rendering; the failure is reported with the version's identity.
func TestHijackingPatchIsRefused(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	victim := cm("tenant-b", "victim", 9, locs("east"), "d:owner=b")
	victim.SetUID("uid-victim")
	o := cm("tenant-a", "o", 10, locs("east", "west"), "d:owner=a", "a:"+contract.SpecDiffAnnotation("east")+"="+hijack)
	o.SetUID("uid-o")
	mustReplace(t, s, 10, victim, o)

	if _, _, ok := s.Get("east", "tenant-a", "o"); ok {
		t.Error("east's view shows the hijacking object")
	}
	err := s.WithheldError("east", "", "tenant-a", "o")
	if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "/metadata") {
		t.Errorf("WithheldError = %v, want a 503 naming /metadata", err)
	}
	t.Log(err)
	res, err := s.List("east", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range res.Items {
		u := item.Unstructured()
		if u.GetNamespace() == "tenant-b" && u.GetUID() != "uid-victim" {
			t.Errorf("east's view shows %s in tenant-b: %v", u.GetUID(), u.Object)
		}
	}
	if len(res.Items) != 1 {
		t.Errorf("east's view lists %d objects, want the victim only", len(res.Items))
	}
	if r, _, _ := unstructured.NestedString(mustGet(t, s, "west", "tenant-a", "o").Object, "data", "owner"); r != "a" {
		t.Errorf("west (no patch) shows %q, want the object as it is", r)
	}
	failures := s.RenderFailures()
	if len(failures) != 1 || failures[0].Location != "east" || failures[0].UID != "uid-o" || failures[0].ResourceVersion != "10" ||
		failures[0].GVK != testGVK || failures[0].Refusal() == nil || failures[0].Refusal().Reason != rendercheck.ReasonProtectedFieldChanged {
		t.Errorf("RenderFailures = %+v, want east's refusal of o@10", failures)
	}

	// A version shown before keeps its rendering when the next one hijacks.
	good := cm("tenant-a", "p", 11, locs("east"), "d:owner=a", "a:"+contract.SpecDiffAnnotation("east")+`=[{"op":"replace","path":"/data/owner","value":"patched"}]`)
	mustAdd(t, s, good)
	bad := cm("tenant-a", "p", 12, locs("east"), "d:owner=a", "a:"+contract.SpecDiffAnnotation("east")+"="+hijack)
	mustUpdate(t, s, bad)
	p := mustGet(t, s, "east", "tenant-a", "p")
	if r, _, _ := unstructured.NestedString(p.Object, "data", "owner"); r != "patched" || p.GetNamespace() != "tenant-a" || p.GetName() != "p" {
		t.Errorf("east's view of p after a hijacking version: %s/%s owner %q, want tenant-a/p owner patched (the last rendering)", p.GetNamespace(), p.GetName(), r)
	}
}

// mustGet returns location's view of namespace/name.
func mustGet(t *testing.T, s *ResourceStore, location, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	o, _, ok := s.Get(location, namespace, name)
	if !ok {
		t.Fatalf("%s's view has no %s/%s", location, namespace, name)
	}
	return o.Unstructured()
}

// movingRules is a Rules whose rendering moves every object into namespace elsewhere: what a
// defect of a rendering path (or a new one) would do. It stands for any producer of
// renderings, which the store checks on the final object.
type movingRules struct{ customization.Rules }

func (movingRules) Touches(schema.GroupVersionResource, string, *unstructured.Unstructured, string) bool {
	return true
}

func (movingRules) Render(_ context.Context, _ schema.GroupVersionResource, _ string, obj *unstructured.Unstructured, _ string) (*unstructured.Unstructured, error) {
	out := obj.DeepCopy()
	out.SetNamespace("elsewhere")
	return out, nil
}

func (movingRules) ResourceVersion() uint64 { return 1 }

func (movingRules) Bindings() *locationbinding.Index { return nil } // the Open mode

func (movingRules) Differs(customization.Rules, schema.GroupVersionResource, string, string, labels.Labels, string) bool {
	return true
}

// TestFinalRenderingIsChecked: whatever produced a rendering, the store refuses one that
// changes a protected field, before it is kept or shown.
func TestFinalRenderingIsChecked(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	s.SetRules(movingRules{}, 0)
	mustReplace(t, s, 10, cm("ns", "o", 10, locs("east")))
	if _, _, ok := s.Get("east", "ns", "o"); ok {
		t.Fatal("the moved rendering is shown")
	}
	f := s.RenderFailures()
	if len(f) != 1 || f[0].Refusal() == nil || f[0].Refusal().Path != "/metadata/namespace" {
		t.Fatalf("RenderFailures = %+v, want a refusal of /metadata/namespace", f)
	}
	var re *customization.RenderError
	if !errors.As(f[0].Err, &re) || re.Reason != rendercheck.ReasonProtectedFieldChanged {
		t.Errorf("the failure is %v, want a RenderError of reason %s", f[0].Err, rendercheck.ReasonProtectedFieldChanged)
	}
}

// blowUpRule is a Customization ns/blow-up of 4 mutations, each adding
// a list of 8 copies of the object so far, which grows a one-key ConfigMap's rendering 9-fold
// per mutation (about 7.7 MB for 1,000 bytes of data) at almost no CEL cost.
func blowUpRule() *controlv1alpha1.Customization {
	c := &controlv1alpha1.Customization{
		ObjectMeta: metav1.ObjectMeta{Name: "blow-up", Namespace: "ns", Generation: 1},
		Spec: controlv1alpha1.CustomizationSpec{
			Resources: []controlv1alpha1.ResourceRule{{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}},
		},
	}
	for i := 0; i < 4; i++ {
		c.Spec.Mutations = append(c.Spec.Mutations, admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
			JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/data/copy` + strconv.Itoa(i) +
				`", value: [object, object, object, object, object, object, object, object]}]`}})
	}
	return c
}

// TestOversizedRenderingsAreNotKept (docs/customization.md, "What a rendering may not change"): versions of a one-key ConfigMap
// that a Customization blows up past the bound are refused with a reason naming the bound, the
// object is withheld (a GET answers 503 saying why), and the heap does not keep the
// renderings: 6 more versions add less than 40 MB to it (without the bound they add about
// 137 MB: each version keeps a 7.7 MB rendering, its encoding and its history).
func TestOversizedRenderingsAreNotKept(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	s.SetRules(rules(t, c, 1, "us", blowUpRule()), 0)
	// The first version warms up what CEL builds once (its environment, type caches).
	mustReplace(t, s, 10, cm("ns", "one", 10, locs("east"), "d:key="+strings.Repeat("v", 1000)))
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for v := uint64(11); v < 17; v++ {
		mustUpdate(t, s, cm("ns", "one", v, locs("east"), "d:key="+strings.Repeat("v", 1000)))
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap after 6 refused versions: %+d bytes", grown)
	if grown > 40<<20 {
		t.Errorf("the heap grew by %d bytes over 6 versions; the refused renderings are kept", grown)
	}
	err := s.WithheldError("east", "", "ns", "one")
	if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), rendercheck.ReasonTooLarge) || !strings.Contains(err.Error(), "3145728") {
		t.Errorf("WithheldError = %v, want a 503 saying the rendering is over 3145728 bytes", err)
	}
	t.Log(err)
	f := s.RenderFailures()
	if len(f) != 1 || f[0].Refusal() == nil || f[0].Refusal().Reason != rendercheck.ReasonTooLarge {
		t.Fatalf("RenderFailures = %+v, want one %s", f, rendercheck.ReasonTooLarge)
	}
	if key, ok := f[0].Customization(); !ok || key.Name != "blow-up" {
		t.Errorf("the failure names %v, want the Customization blow-up", key)
	}
}
