package location

import (
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
)

// fakeRegistry is a Registry whose SyncTargets and Lease renew times the test sets.
type fakeRegistry struct {
	targets []*controlv1alpha1.SyncTarget
	renewed map[string]*metav1.MicroTime
}

func (f *fakeRegistry) SyncTargets() []*controlv1alpha1.SyncTarget  { return f.targets }
func (f *fakeRegistry) RenewTime(location string) *metav1.MicroTime { return f.renewed[location] }

// fakeHealth is a ResourceHealth with fixed unsynced resources.
type fakeHealth []mapper.UnsyncedResource

func (f fakeHealth) UnsyncedResources() []mapper.UnsyncedResource { return f }

// TestLocationsTable: a registered location without objects is listed with READY from its
// SyncTarget's condition, MODE, IN-SYNC, HEARTBEAT from its Lease and AGE from the
// SyncTarget's creation; a location seen only in annotations has "<none>" there; the wide
// columns carry the SyncTarget's labels and capacity; every Location carries the unsynced
// resources.
func TestLocationsTable(t *testing.T) {
	now := time.Now()
	created := metav1.NewTime(now.Add(-2 * time.Hour))
	renewed := metav1.NewMicroTime(now.Add(-7 * time.Second))
	reg := &fakeRegistry{
		targets: []*controlv1alpha1.SyncTarget{{
			ObjectMeta: metav1.ObjectMeta{Name: "edge", Labels: map[string]string{"region": "eu", "tier": "edge"}, CreationTimestamp: created},
			Spec:       controlv1alpha1.SyncTargetSpec{HaltedResources: []string{"configmaps", "widgets.example.com"}},
			Status: controlv1alpha1.SyncTargetStatus{
				Conditions: []metav1.Condition{{Type: controlv1alpha1.SyncTargetReady, Status: metav1.ConditionTrue, Reason: controlv1alpha1.ReasonMapperReady}},
				Mapper:     &controlv1alpha1.MapperStatus{Identity: "host_1", Mode: controlv1alpha1.ModePush},
				Objects:    &controlv1alpha1.ObjectCounts{Assigned: 0, InSync: 0},
				Capacity: corev1.ResourceList{
					corev1.ResourcePods:   resource.MustParse("110"),
					corev1.ResourceCPU:    resource.MustParse("4"),
					corev1.ResourceMemory: resource.MustParse("16Gi"),
				},
			},
		}},
		renewed: map[string]*metav1.MicroTime{"edge": &renewed},
	}
	unsynced := fakeHealth{{Group: "example.com", Resource: "gates", Reason: "Forbidden", Message: "gates.example.com is forbidden"}}
	src := &statsSource{stats: map[string]cache.LocationStats{
		"east": {Objects: 3, Deleting: 1, Watchers: 1, FirstSeen: now.Add(-90 * time.Second), Resources: map[schema.GroupResource]int{{Resource: "configmaps"}: 3}},
	}}
	r := NewREST(Config{Stats: src, Registry: reg, Resources: unsynced})
	defer r.Destroy()

	// By default only registered locations; the others behind a field selector.
	registered, err := r.List(context.Background(), &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unregistered, err := r.List(context.Background(), &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("status.registered", "false")})
	if err != nil {
		t.Fatal(err)
	}
	if got := registered.(*mapper.LocationList).Items; len(got) != 1 || got[0].Name != "edge" {
		t.Fatalf("the default list = %+v, want edge (registered) only", got)
	}
	if got := unregistered.(*mapper.LocationList).Items; len(got) != 1 || got[0].Name != "east" {
		t.Fatalf("the list of status.registered=false = %+v, want east (annotations only)", got)
	}
	ll := registered.(*mapper.LocationList)
	ll.Items = append(unregistered.(*mapper.LocationList).Items, ll.Items...)
	list := ll
	for _, l := range ll.Items {
		if !reflect.DeepEqual(l.Status.UnsyncedResources, []mapper.UnsyncedResource(unsynced)) {
			t.Errorf("%s: unsyncedResources = %+v, want %+v", l.Name, l.Status.UnsyncedResources, unsynced)
		}
	}
	if edge := ll.Items[1]; !edge.Status.Registered || edge.Labels["region"] != "eu" || !edge.CreationTimestamp.Equal(&created) || edge.Status.HeartbeatTime == nil {
		t.Errorf("edge = %+v, want registered with the SyncTarget's labels, creation time and the Lease's renewTime", edge)
	}

	table, err := convertToTable(context.Background(), list, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	wide := map[string]bool{}
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
		wide[c.Name] = c.Priority > 0
	}
	if want := []string{"Name", "Ready", "Mode", "Objects", "Deleting", "In-Sync", "Watchers", "Heartbeat", "Paused", "Age", "Labels", "Capacity"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("columns = %v, want %v", names, want)
	}
	if !wide["Labels"] || !wide["Capacity"] || wide["Heartbeat"] {
		t.Errorf("only Labels and Capacity are -o wide columns: %v", wide)
	}
	if table.ResourceVersion != ll.ResourceVersion {
		t.Errorf("table resourceVersion %q, list %q", table.ResourceVersion, ll.ResourceVersion)
	}
	want := [][]interface{}{
		{"east", "<none>", "<none>", int64(3), int64(1), "<none>", int32(1), "<none>", "<none>", "90s", "<none>", "<none>"},
		{"edge", "True", "Push", int64(0), int64(0), int64(0), int32(0), "7s", "configmaps,widgets.example.com", "120m", "region=eu,tier=edge", "cpu=4,memory=16Gi,pods=110"},
	}
	for i, row := range table.Rows {
		if !reflect.DeepEqual(row.Cells, want[i]) {
			t.Errorf("row %d = %#v, want %#v", i, row.Cells, want[i])
		}
		if row.Object.Object != &ll.Items[i] {
			t.Errorf("row %d does not carry its Location", i)
		}
	}

	one, err := r.Get(context.Background(), "edge", nil)
	if err != nil {
		t.Fatalf("GET of a registered location without objects: %v", err)
	}
	single, err := convertToTable(context.Background(), one, &metav1.TableOptions{NoHeaders: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(single.ColumnDefinitions) != 0 || len(single.Rows) != 1 || single.Rows[0].Cells[1] != "True" {
		t.Errorf("one location without headers: %+v", single)
	}

	_, err = convertToTable(context.Background(), &metav1.Status{}, nil, now)
	if status, ok := err.(apierrors.APIStatus); !ok || status.Status().Code != http.StatusNotAcceptable {
		t.Errorf("a table of something else: want 406, got %v", err)
	}
}

// TestLocationsFollowRegistrations: a SyncTarget's deletion removes a location without
// objects, and a renewed Lease is a MODIFIED event with the new heartbeat.
func TestLocationsFollowRegistrations(t *testing.T) {
	renewed := metav1.NewMicroTime(time.Now().Add(-time.Minute))
	reg := &fakeRegistry{
		targets: []*controlv1alpha1.SyncTarget{{ObjectMeta: metav1.ObjectMeta{Name: "edge"}}},
		renewed: map[string]*metav1.MicroTime{"edge": &renewed},
	}
	p := newPoller(builder{stats: &statsSource{}, registry: reg}.locations)
	items, rv := p.current()
	if len(items) != 1 || !items[0].Status.HeartbeatTime.Equal(&renewed) {
		t.Fatalf("locations = %+v", items)
	}
	later := metav1.NewMicroTime(renewed.Add(10 * time.Second))
	reg.renewed = map[string]*metav1.MicroTime{"edge": &later}
	items, rv2 := p.current()
	if rv2 == rv || !items[0].Status.HeartbeatTime.Equal(&later) {
		t.Errorf("after a Lease renewal: resourceVersion %d -> %d, heartbeat %v", rv, rv2, items[0].Status.HeartbeatTime)
	}
	reg.targets = nil
	if items, _ := p.current(); len(items) != 0 {
		t.Errorf("after the SyncTarget's deletion: %+v, want none", items)
	}
}

// TestPausedColumn: the Paused column says true for a paused location (whatever it halts),
// the halted resources of one that halts some, false otherwise, and <none> without a
// SyncTarget.
func TestPausedColumn(t *testing.T) {
	for _, c := range []struct {
		s    mapper.LocationStatus
		want string
	}{
		{mapper.LocationStatus{}, "<none>"},
		{mapper.LocationStatus{Registered: true}, "false"},
		{mapper.LocationStatus{Registered: true, Paused: true, HaltedResources: []string{"configmaps"}}, "true"},
		{mapper.LocationStatus{Registered: true, HaltedResources: []string{"configmaps"}}, "configmaps"},
	} {
		if got := paused(c.s); got != c.want {
			t.Errorf("paused(%+v) = %q, want %q", c.s, got, c.want)
		}
	}
}
