package heartbeat

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/verify"
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
