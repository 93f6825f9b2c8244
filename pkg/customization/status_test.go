package customization

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// TestDesiredStatus: the conditions, the count and the first failures in name order; a status
// that did not change is equal to the one computed again later (so nothing is written), and a
// condition keeps its lastTransitionTime while its status stays.
func TestDesiredStatus(t *testing.T) {
	c := customization("region")
	c.Generation = 3
	t0, t1 := metav1.NewTime(time.Unix(1000, 0)), metav1.NewTime(time.Unix(2000, 0))

	ok := desiredStatus(c, nil, Failures{}, 4, "", false, t0)
	if ok.ObservedGeneration != 3 || ok.FailingObjects != 0 || ok.Failures != nil || ok.SelectedObjects == nil || *ok.SelectedObjects != 4 {
		t.Errorf("status without failures: %+v", ok)
	}
	for _, typ := range []string{controlv1alpha1.CustomizationCompiled, controlv1alpha1.CustomizationReady} {
		if cond := meta.FindStatusCondition(ok.Conditions, typ); cond == nil || cond.Status != metav1.ConditionTrue {
			t.Errorf("%s: %+v, want True", typ, cond)
		}
	}
	c.Status = ok
	if again := desiredStatus(c, nil, Failures{}, 4, "", false, t1); !apiequality.Semantic.DeepEqual(again, ok) {
		t.Errorf("an unchanged status was computed differently later:\n%+v\n%+v", again, ok)
	}

	var failures []Failure
	for i := 12; i > 0; i-- {
		failures = append(failures, Failure{Resource: "deployments.apps", Namespace: "apps", Name: fmt.Sprintf("web-%02d", i),
			Location: "east", Reason: ReasonMutationFailed, Message: "no such key: zone"})
	}
	failing := desiredStatus(c, nil, Failures{Count: int64(len(failures)), Some: failures}, 24, "", false, t1)
	ready := meta.FindStatusCondition(failing.Conditions, controlv1alpha1.CustomizationReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != controlv1alpha1.ReasonRenderFailed || !ready.LastTransitionTime.Equal(&t1) {
		t.Errorf("Ready with failures: %+v", ready)
	}
	if compiled := meta.FindStatusCondition(failing.Conditions, controlv1alpha1.CustomizationCompiled); compiled == nil || !compiled.LastTransitionTime.Equal(&t0) {
		t.Errorf("Compiled, which stayed True, changed its lastTransitionTime: %+v", compiled)
	}
	if failing.FailingObjects != 12 || len(failing.Failures) != controlv1alpha1.MaxCustomizationFailures {
		t.Fatalf("failingObjects %d, %d failures listed; want 12 and %d", failing.FailingObjects, len(failing.Failures), controlv1alpha1.MaxCustomizationFailures)
	}
	if f := failing.Failures[0]; f.Name != "apps/web-01" || f.Location != "east" || f.Reason != ReasonMutationFailed {
		t.Errorf("first failure %+v, want apps/web-01 for east", f)
	}

	broken := desiredStatus(c, []CompileError{{Name: "region", Namespace: "apps", Field: "spec.variables[0].expression", Err: errors.New("Syntax error")}}, Failures{}, 4, "", false, t1)
	compiled := meta.FindStatusCondition(broken.Conditions, controlv1alpha1.CustomizationCompiled)
	if compiled == nil || compiled.Status != metav1.ConditionFalse || compiled.Reason != controlv1alpha1.ReasonCompilationFailed {
		t.Errorf("Compiled with a compile error: %+v", compiled)
	}
	if ready := meta.FindStatusCondition(broken.Conditions, controlv1alpha1.CustomizationReady); ready == nil || ready.Reason != controlv1alpha1.ReasonCompilationFailed {
		t.Errorf("Ready with a compile error: %+v", ready)
	}

	long := []Failure{{Resource: "deployments.apps", Namespace: "apps", Name: "web", Location: "east", Reason: ReasonMutationFailed,
		Message: "spec.mutations[0]: expression '" + strings.Repeat("x", 400) + "' resulted in error: no such key: zone"}}
	if m := desiredStatus(c, nil, Failures{Count: 1, Some: long}, 4, "", false, t1).Failures[0].Message; len(m) > maxFailureMessage+len("…") || !strings.HasSuffix(m, "no such key: zone") {
		t.Errorf("a long message is kept as %q (%d bytes), want its last %d bytes with the cause", m, len(m), maxFailureMessage)
	}
}

// TestDesiredStatusSelectsNothing: a Customization that selects no (object, location) pair
// says so: selectedObjects 0 and Ready True with reason NoObjectsSelected, not
// AllObjectsRendered; once it selects some, AllObjectsRendered with the count.
func TestDesiredStatusSelectsNothing(t *testing.T) {
	c := customization("region")
	now := metav1.NewTime(time.Unix(1000, 0))
	none := desiredStatus(c, nil, Failures{}, 0, "", false, now)
	ready := meta.FindStatusCondition(none.Conditions, controlv1alpha1.CustomizationReady)
	if none.SelectedObjects == nil || *none.SelectedObjects != 0 || ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != controlv1alpha1.ReasonNoObjectsSelected {
		t.Fatalf("selecting nothing: selectedObjects %v, Ready %+v; want 0 and True/NoObjectsSelected", none.SelectedObjects, ready)
	}
	c.Status = none
	some := desiredStatus(c, nil, Failures{}, 6, "", false, now)
	ready = meta.FindStatusCondition(some.Conditions, controlv1alpha1.CustomizationReady)
	if *some.SelectedObjects != 6 || ready.Reason != controlv1alpha1.ReasonAllObjectsRendered || !strings.Contains(ready.Message, "6 selected") {
		t.Fatalf("selecting 6 pairs: selectedObjects %d, Ready %+v", *some.SelectedObjects, ready)
	}
}
