package kubectlmapper

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	mapperv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/v1alpha1"
)

func TestSummarizeLocation(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	heartbeat := metav1.NewMicroTime(now.Add(-7 * time.Second))
	l := &mapperv1alpha1.Location{ObjectMeta: metav1.ObjectMeta{Name: "east"}, Status: mapperv1alpha1.LocationStatus{
		Registered: true, Objects: 5, Deleting: 1, HaltedResources: []string{"configmaps"},
		Conditions: []metav1.Condition{
			{Type: controlv1alpha1.SyncTargetReady, Status: metav1.ConditionFalse, Reason: controlv1alpha1.ReasonShardsNotReady},
			{Type: controlv1alpha1.SyncTargetResourcesCompatible, Status: metav1.ConditionFalse, Message: "widgets.example.com: not served"},
		},
		Mapper:                &mapperv1alpha1.LocationMapper{Identity: "host_1", Version: "v1", Mode: controlv1alpha1.ModePull},
		Verified:              &mapperv1alpha1.VerifiedObjects{Assigned: 5, InSync: 3, InViolation: 2},
		CustomizationFailures: []mapperv1alpha1.CustomizationFailures{{FailingObjects: 2}, {FailingObjects: 1}},
		HeartbeatTime:         &heartbeat,
	}}
	st := &controlv1alpha1.SyncTarget{Status: controlv1alpha1.SyncTargetStatus{Shards: []controlv1alpha1.ShardStatus{
		{Name: "shards/0-of-2", Ready: metav1.ConditionTrue}, {Name: "shards/1-of-2", Ready: metav1.ConditionUnknown},
	}}}
	s := SummarizeLocation(l, st)
	inSync, failing := int64(3), int64(2)
	want := LocationSummary{
		Registered: true, Ready: "False", ReadyReason: controlv1alpha1.ReasonShardsNotReady, Mode: "Pull", Identity: "host_1", Version: "v1",
		Shards: 2, ShardsReady: 1, Objects: 5, Deleting: 1, InSync: &inSync, Failing: &failing, RenderFailures: 3,
		HaltedResources: []string{"configmaps"}, HeartbeatTime: &heartbeat,
		ResourcesCompatible: "False", ResourcesCompatibleMessage: "widgets.example.com: not served",
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("SummarizeLocation:\n got %+v\nwant %+v", s, want)
	}
	row := locationRow("east", s, now)
	wantRow := []interface{}{"east", "False", "Pull", "1/2", int64(5), "3", "2", "configmaps", "7s", controlv1alpha1.ReasonShardsNotReady, "False", int64(1), int64(3), "host_1", "v1"}
	if !reflect.DeepEqual(row, wantRow) {
		t.Errorf("locationRow:\n got %v\nwant %v", row, wantRow)
	}
	if len(row) != len(locationColumns) {
		t.Errorf("locationRow has %d cells for %d columns", len(row), len(locationColumns))
	}

	// Unregistered, without a mapper or a verification: nothing is made up.
	s = SummarizeLocation(&mapperv1alpha1.Location{ObjectMeta: metav1.ObjectMeta{Name: "gone"}, Status: mapperv1alpha1.LocationStatus{Objects: 2}}, nil)
	if !reflect.DeepEqual(s, LocationSummary{Objects: 2}) {
		t.Errorf("SummarizeLocation of an unregistered location = %+v", s)
	}
	wantRow = []interface{}{"gone", none, none, "0/0", int64(2), none, none, none, none, none, none, int64(0), int64(0), none, none}
	if row := locationRow("gone", s, now); !reflect.DeepEqual(row, wantRow) {
		t.Errorf("locationRow of an unregistered location:\n got %v\nwant %v", row, wantRow)
	}
}

func TestViewKubeconfig(t *testing.T) {
	kc, err := ViewKubeconfig(&rest.Config{Host: "https://source.example:6443/", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}, "east", "tok")
	if err != nil {
		t.Fatal(err)
	}
	c := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster]
	if c.Server != "https://source.example:6443/apis/mapper.kcp.io/v1alpha1/locations/east/proxy" || string(c.CertificateAuthorityData) != "ca" {
		t.Errorf("the view cluster is %+v", c)
	}
	if a := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]; a.Token != "tok" {
		t.Errorf("the view user is %+v", a)
	}
	if _, err := ViewKubeconfig(&rest.Config{Host: "https://s", TLSClientConfig: rest.TLSClientConfig{CAFile: "/nonexistent/ca.crt"}}, "east", "tok"); err == nil {
		t.Error("a CA file that cannot be read is no error")
	}
}

func TestRegisterValidate(t *testing.T) {
	for _, c := range []struct {
		name    string
		o       registerOptions
		wantErr bool
	}{
		{"pull", registerOptions{location: "east", targetKubeconfig: "k"}, false},
		{"push", registerOptions{location: "east", targetKubeconfig: "k", push: true, users: []string{"ctrl"}}, false},
		{"no target", registerOptions{location: "east"}, true},
		{"bad location", registerOptions{location: "East.1", targetKubeconfig: "k"}, true},
		{"both modes", registerOptions{location: "east", targetKubeconfig: "k", push: true, pull: true}, true},
		{"bad labels", registerOptions{location: "east", targetKubeconfig: "k", labels: "a=b=c"}, true},
		{"users for pull", registerOptions{location: "east", targetKubeconfig: "k", users: []string{"u"}}, true},
		{"target context for pull", registerOptions{location: "east", targetKubeconfig: "k", targetContext: "c"}, true},
	} {
		err := c.o.validate()
		if (err != nil) != c.wantErr {
			t.Errorf("%s: validate() = %v, want error %v", c.name, err, c.wantErr)
		}
	}
	o := registerOptions{location: "east", targetKubeconfig: "k"}
	_ = o.validate()
	if o.serviceAccount != "cluster-mapper-system/mapper-east" || o.viewKubeconfig != "east-view.kubeconfig" {
		t.Errorf("pull defaults: service account %q, view kubeconfig %q", o.serviceAccount, o.viewKubeconfig)
	}
}
