package customization

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// listBuilding is a mutation whose expression builds lists: about 12,000 cost units.
var listBuilding = jsonPatch(`[JSONPatch{op: "add", path: "/metadata/labels/n", value: string(lists.range(100).map(i, lists.range(100).size()).size())}]`)

// TestMeterCountsAndBounds: a Meter counts the CEL cost of every expression of a rendering
// (the same for the same rendering), and a rendering that spends more than its limit fails with
// ReasonBudgetExceeded naming the Customization and the mutation that crossed it.
func TestMeterCountsAndBounds(t *testing.T) {
	s := snapshot(t, customization("heavy", listBuilding, listBuilding))
	free := NewMeter(0)
	if _, err := s.Render(WithMeter(context.Background(), free), deploymentsGVR, "default", deployment(), "east"); err != nil {
		t.Fatalf("render without a limit: %v", err)
	}
	spent := free.Spent()
	if spent < 10_000 {
		t.Fatalf("two list-building mutations cost %d, want at least 10,000", spent)
	}
	again := NewMeter(0)
	if _, err := s.Render(WithMeter(context.Background(), again), deploymentsGVR, "default", deployment(), "east"); err != nil || again.Spent() != spent {
		t.Fatalf("the same rendering cost %d (%v), want %d", again.Spent(), err, spent)
	}

	// A limit between one mutation's cost and two's: the second fails.
	m := NewMeter(spent * 3 / 4)
	_, err := s.Render(WithMeter(context.Background(), m), deploymentsGVR, "default", deployment(), "east")
	var re *RenderError
	if !errors.As(err, &re) || re.Reason != ReasonBudgetExceeded || re.Customization != "heavy" || re.Field != "spec.mutations[1]" {
		t.Fatalf("render over the limit: %v, want BudgetExceeded of heavy at spec.mutations[1]", err)
	}
	// A Meter already spent stops the next Customization before any expression.
	_, err = s.Render(WithMeter(context.Background(), m), deploymentsGVR, "default", deployment(), "west")
	if !errors.As(err, &re) || re.Reason != ReasonBudgetExceeded || re.Field != "" {
		t.Fatalf("render with a spent meter: %v, want BudgetExceeded before the mutations", err)
	}
}

// TestLimitsPerNamespace: over the namespace's limits, the newest Customizations are not
// applied (an object they select fails with LimitExceeded, never renders without them), older
// ones always are, and a limited one that becomes within the limits is a change (Differs).
func TestLimitsPerNamespace(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	older, newer, newest := customization("b-older", listBuilding), customization("a-newer", listBuilding, listBuilding), customization("c-newest", listBuilding)
	older.CreationTimestamp = t0
	newer.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	newest.CreationTimestamp = metav1.NewTime(t0.Add(2 * time.Minute))
	compile := func(l Limits, cs ...*controlv1alpha1.Customization) *Snapshot {
		s, errs := NewCompiler(Options{PlainCluster: "default", Limits: l}).Snapshot(1, cs, locations)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return s
	}

	s := compile(Limits{CustomizationsPerNamespace: 2}, older, newer, newest)
	limited := s.Limited()
	if len(limited) != 1 || limited[RuleKey{Cluster: "default", Namespace: "apps", Name: "c-newest"}] == "" {
		t.Fatalf("limited %v, want c-newest only", limited)
	}
	_, err := s.Render(context.Background(), deploymentsGVR, "default", deployment(), "east")
	var re *RenderError
	if !errors.As(err, &re) || re.Reason != ReasonLimitExceeded || re.Customization != "c-newest" {
		t.Fatalf("render with a limited Customization: %v, want LimitExceeded of c-newest", err)
	}

	// Three mutations at most: b-older (1) and a-newer (2) fit, c-newest (1) does not.
	s = compile(Limits{MutationsPerNamespace: 3}, older, newer, newest)
	if got := s.Limited(); len(got) != 1 || got[RuleKey{Cluster: "default", Namespace: "apps", Name: "c-newest"}] == "" {
		t.Fatalf("limited by mutations %v, want c-newest only", got)
	}
	// Two: a-newer (2 more) does not fit, c-newest (1 more) does.
	s = compile(Limits{MutationsPerNamespace: 2}, older, newer, newest)
	if got := s.Limited(); len(got) != 1 || got[RuleKey{Cluster: "default", Namespace: "apps", Name: "a-newer"}] == "" {
		t.Fatalf("limited by mutations %v, want a-newer only", got)
	}

	// Deleting the oldest lets the newest in: the renderings it selects differ.
	before := compile(Limits{CustomizationsPerNamespace: 2}, older, newer, newest)
	after := compile(Limits{CustomizationsPerNamespace: 2}, newer, newest)
	if len(after.Limited()) != 0 {
		t.Fatalf("limited after the oldest left: %v", after.Limited())
	}
	if !after.Differs(before, deploymentsGVR, "default", "apps", nil, "east") {
		t.Error("a Customization that became within the limits is no change (Differs false)")
	}
}

// TestDegradedCondition: the Degraded condition says LimitExceeded, BudgetExceeded or Throttled,
// in that order, and WithinBudget otherwise.
func TestDegradedCondition(t *testing.T) {
	c := customization("region")
	now := metav1.NewTime(time.Unix(1000, 0))
	over := []Failure{{Reason: ReasonBudgetExceeded}, {Reason: ReasonMutationFailed}}
	for _, tc := range []struct {
		failures  []Failure
		limited   string
		throttled bool
		status    metav1.ConditionStatus
		reason    string
	}{
		{nil, "", false, metav1.ConditionFalse, controlv1alpha1.ReasonWithinBudget},
		{[]Failure{{Reason: ReasonMutationFailed}}, "", false, metav1.ConditionFalse, controlv1alpha1.ReasonWithinBudget},
		{nil, "", true, metav1.ConditionTrue, controlv1alpha1.ReasonThrottled},
		{over, "", true, metav1.ConditionTrue, controlv1alpha1.ReasonBudgetExceeded},
		{over, "too many", true, metav1.ConditionTrue, controlv1alpha1.ReasonLimitExceeded},
	} {
		st := desiredStatus(c, nil, Failures{Count: int64(len(tc.failures)), Some: tc.failures}, 1, tc.limited, tc.throttled, now)
		d := meta.FindStatusCondition(st.Conditions, controlv1alpha1.CustomizationDegraded)
		if d == nil || d.Status != tc.status || d.Reason != tc.reason {
			t.Errorf("failures %v, limited %q, throttled %v: Degraded %+v, want %s (%s)", tc.failures, tc.limited, tc.throttled, d, tc.status, tc.reason)
		}
	}
}
