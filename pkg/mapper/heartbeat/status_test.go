package heartbeat

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/verify"
	"github.com/cluster-mapper/cluster-mapper/pkg/schemacompat"
)

func TestCounts(t *testing.T) {
	r := &verify.Report{ViewObjects: 5, Violations: []verify.Violation{
		{Invariant: 1, Resource: "configmaps", Source: "c|ns/a"},
		{Invariant: 2, Resource: "configmaps", Source: "c|ns/a"},
		{Invariant: 1, Resource: "secrets", Source: "c|ns/a"},
		{Invariant: 4, Resource: "configmaps", Target: "ns/orphan"},
	}, Total: 4}
	c := Counts(r, metav1.Now())
	if c.Assigned != 5 || c.InSync != 3 || c.InViolation != 4 {
		t.Errorf("Counts = %+v, want assigned 5, inSync 3 (two distinct objects in violation), inViolation 4", c)
	}
}

func TestDesiredStatus(t *testing.T) {
	cfg := Config{Identity: "host_1", Version: "v1", Mode: controlv1alpha1.ModePull}
	obs := Observation{Ready: metav1.ConditionTrue, Reason: controlv1alpha1.ReasonMapperReady, Resources: []controlv1alpha1.ResourceState{
		{Resource: "configmaps", State: controlv1alpha1.ResourceSynced},
		{Resource: "widgets.example.com", State: controlv1alpha1.ResourceHalted, Reason: controlv1alpha1.ReasonTargetLacksResource},
	}}
	// A status the controller set Unknown an hour ago.
	old := controlv1alpha1.SyncTargetStatus{Conditions: []metav1.Condition{{
		Type: controlv1alpha1.SyncTargetReady, Status: metav1.ConditionUnknown, Reason: controlv1alpha1.ReasonLeaseExpired,
		LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour)),
	}}}
	s := desiredStatus(old, obs, &controlv1alpha1.ObjectCounts{Assigned: 2, InSync: 2}, cfg, nil)
	ready := meta.FindStatusCondition(s.Conditions, controlv1alpha1.SyncTargetReady)
	if ready.Status != metav1.ConditionTrue || time.Since(ready.LastTransitionTime.Time) > time.Minute {
		t.Errorf("Ready = %+v, want True with a new transition time", ready)
	}
	compat := meta.FindStatusCondition(s.Conditions, controlv1alpha1.SyncTargetResourcesCompatible)
	if compat == nil || compat.Status != metav1.ConditionFalse || compat.Reason != controlv1alpha1.ReasonResourcesHalted {
		t.Errorf("ResourcesCompatible = %+v, want False/ResourcesHalted", compat)
	}
	if s.Mapper.Identity != "host_1" || s.Objects.Assigned != 2 || len(s.Resources) != 2 {
		t.Errorf("status = %+v", s)
	}
	if equalIgnoringTimes(old, s) {
		t.Error("a changed status compares equal")
	}
	// The same observation later: only times differ, so nothing needs writing.
	later := desiredStatus(s, obs, &controlv1alpha1.ObjectCounts{Assigned: 2, InSync: 2, VerifiedTime: &metav1.Time{Time: time.Now()}}, cfg, nil)
	if !equalIgnoringTimes(s, later) {
		t.Errorf("an unchanged observation compares unequal:\n%+v\n%+v", s, later)
	}
	if old.Conditions[0].Status != metav1.ConditionUnknown {
		t.Error("desiredStatus modified its input")
	}
}

// TestResourcesCompatible: the condition names each resource the target does not serve, or
// serves with a schema that may refuse the source's objects, with its reason; Unknown when
// only a comparison could not tell.
func TestResourcesCompatible(t *testing.T) {
	synced := controlv1alpha1.ResourceState{Resource: "configmaps", State: controlv1alpha1.ResourceSynced}
	lacking := ResourceStateOf(mapper.ResourceState{Resource: "widgets.example.com", Known: true, Halted: true})
	narrower := ResourceStateOf(mapper.ResourceState{Resource: "gadgets.example.com", Known: true,
		Schema: mapper.SchemaState{Verdict: schemacompat.Incompatible, Message: ".spec.name: maxLength 8 on the target, 64 in the source"}})
	unknown := ResourceStateOf(mapper.ResourceState{Resource: "things.example.com", Known: true,
		Schema: mapper.SchemaState{Verdict: schemacompat.Unknown, Message: ".spec.x: pattern differs"}})
	if narrower.State != controlv1alpha1.ResourceSynced || narrower.Reason != controlv1alpha1.ReasonSchemaIncompatible || !strings.Contains(narrower.Message, "maxLength 8") {
		t.Errorf("an incompatible schema's entry: %+v", narrower)
	}
	for _, tc := range []struct {
		name      string
		resources []controlv1alpha1.ResourceState
		status    metav1.ConditionStatus
		reason    string
		text      []string
	}{
		{"all served", []controlv1alpha1.ResourceState{synced}, metav1.ConditionTrue, controlv1alpha1.ReasonAllResourcesServed, nil},
		{"halted and narrower", []controlv1alpha1.ResourceState{synced, narrower, unknown, lacking}, metav1.ConditionFalse, controlv1alpha1.ReasonResourcesHalted,
			[]string{"2 resources", "widgets.example.com (TargetLacksResource)", "gadgets.example.com (SchemaIncompatible: ", "maxLength 8 on the target"}},
		{"narrower only", []controlv1alpha1.ResourceState{synced, narrower}, metav1.ConditionFalse, controlv1alpha1.ReasonSchemaIncompatible, []string{"gadgets.example.com"}},
		{"unknown only", []controlv1alpha1.ResourceState{synced, unknown}, metav1.ConditionUnknown, controlv1alpha1.ReasonSchemaUnknown, []string{"things.example.com (.spec.x: pattern differs)"}},
	} {
		c := ResourcesCompatible(tc.resources, nil)
		if c.Status != tc.status || c.Reason != tc.reason {
			t.Errorf("%s: %s/%s, want %s/%s", tc.name, c.Status, c.Reason, tc.status, tc.reason)
		}
		for _, s := range tc.text {
			if !strings.Contains(c.Message, s) {
				t.Errorf("%s: message %q does not contain %q", tc.name, c.Message, s)
			}
		}
	}
}
