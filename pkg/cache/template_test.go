package cache

import (
	"bytes"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestTemplateViewsMatchRendering: for objects assigned to several locations whose views differ
// in the assignment only, compact keeps one JSON (no decoded tree, no rendered views), and the
// view ForLocation makes from it by replacing the assignment value is byte for byte the
// encoding of the rendered view (LocationView at the object's resourceVersion), also when the
// assignment key and value occur nested as well (the hole is found structurally). Objects whose
// views differ in more than that keep rendered views, which are right too. Objects carrying location finalizers are templates with
// a finalizers hole (each view shows its own finalizer only); one carrying the finalizer of a
// location it is not assigned to is not (that view shows a deletion).
func TestTemplateViewsMatchRendering(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	all := []string{"east", "west", "north", "south"}
	cases := 0
	for i := 0; i < 300; i++ {
		n := 2 + rng.Intn(3)
		ls := append([]string{}, all[:n]...)
		sort.Strings(ls)
		extra := []string{"l:app=x" + strconv.Itoa(i%3), "d:k=<value & " + strconv.Itoa(i) + ">"}
		wantTemplate := true
		switch i % 5 {
		case 1:
			extra = append(extra, "a:"+contract.StatusRecordAnnotation("east")+`={"p":1}`)
			wantTemplate = false
		case 2:
			extra = append(extra, "a:"+contract.LastAppliedConfigAnnotation+"={}")
			wantTemplate = false
		case 3:
			extra = append(extra, "a:note=ü \u2028 \"quoted\"")
		case 4:
			// Finalizers of some locations (the deletion protocol) and another controller's:
			// each view shows its own only (the finalizers hole of the template).
			extra = append(extra, "f:"+contract.LocationFinalizer(ls[0]))
			if i%3 == 0 {
				extra = append(extra, "f:example.com/other")
			}
			extra = append(extra, "f:"+contract.LocationFinalizer(ls[1]))
		}
		if i%11 == 0 {
			// The finalizer of a location it is not assigned to: that view shows a deletion.
			extra = append(extra, "f:"+contract.LocationFinalizer("gone"), "c:2026-01-01T00:00:00Z")
			wantTemplate = false
		}
		u := cm("ns", fmt.Sprintf("o%d", i), uint64(i+10), locs(ls...), extra...)
		if i%7 == 0 && i%11 != 0 {
			// The assignment key and value also occur in a nested object, which views show as
			// it is.
			u.Object["spec"] = map[string]interface{}{"template": map[string]interface{}{"metadata": map[string]interface{}{
				"annotations": map[string]interface{}{contract.AssignedLocationsAnnotation: u.GetAnnotations()[contract.AssignedLocationsAnnotation]}}}}
		}
		orig := u.DeepCopy()
		o := newObject(contract.NewKey("root", "ns", u.GetName()), "root", "ns", u.GetName(), locs(ls...), uint64(i+10), u)
		o.compact(nil)
		if got := o.hole.end > 0; got != wantTemplate {
			t.Fatalf("object %d: template %v, want %v", i, got, wantTemplate)
		}
		if wantTemplate && (o.u != nil || len(o.variants.m) != 0) {
			t.Fatalf("object %d: a template object kept its tree or rendered views", i)
		}
		for _, loc := range o.locations {
			want, err := LocationView(orig, o.assigned, loc).MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			want = bytes.TrimSuffix(want, []byte{'\n'}) // an Object's JSON ends with its closing brace
			got, err := o.ForLocation(loc).MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("object %d, location %s:\n got %s\nwant %s", i, loc, got, want)
			}
			v := o.ForLocation(loc)
			if v != o.ForLocation(loc) {
				t.Fatalf("object %d, location %s: the view is made again on every read", i, loc)
			}
			var written bytes.Buffer
			if err := v.WriteJSON(&written); err != nil || written.String() != string(want) {
				t.Fatalf("object %d, location %s: WriteJSON %q (%v)", i, loc, written.String(), err)
			}
			if wantTemplate && !v.json.IsZero() {
				t.Fatalf("object %d, location %s: a view made from the object's JSON holds a copy", i, loc)
			}
		}
		if wantTemplate {
			cases++
		}
	}
	if cases < 100 {
		t.Fatalf("only %d template objects tested", cases)
	}
}
