package location

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
)

// none is the cell of a value that is not known, as kube-apiserver's printers write it.
const none = "<none>"

// capacityResources are the resources of the CAPACITY column, in order.
var capacityResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods}

// tableColumns are the columns of `kubectl get locations`; priority 1 columns are shown by
// `-o wide` only.
var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the location"},
	{Name: "Ready", Type: "string", Description: "Status of the SyncTarget's Ready condition (True, False, Unknown)"},
	{Name: "Mode", Type: "string", Description: "Mode of the location's mapper (Pull, Push)"},
	{Name: "Objects", Type: "integer", Description: "Objects in the location's view: assigned to it in the source, or waiting for it to delete its copy"},
	{Name: "Deleting", Type: "integer", Description: "Objects waiting for the location to delete its copy (they carry its finalizer, locations.mapper.kcp.io/<location>)"},
	{Name: "In-Sync", Type: "integer", Description: "Assigned objects without a violation at the mapper's latest verification"},
	{Name: "Watchers", Type: "integer", Description: "Watches open on the location's view"},
	{Name: "Heartbeat", Type: "string", Description: "Time since the location's Lease was last renewed"},
	{Name: "Paused", Type: "string", Description: "Whether the location's mappers write nothing on the target: true (its SyncTarget's spec.paused), the resources they write nothing of (spec.haltedResources), or false"},
	{Name: "Age", Type: "string", Description: "Time since the location was registered (its SyncTarget was created) or, unregistered, first seen"},
	{Name: "Labels", Type: "string", Priority: 1, Description: "Labels of the location (its SyncTarget's)"},
	{Name: "Capacity", Type: "string", Priority: 1, Description: "Allocatable cpu, memory and pods of the target's nodes"},
}

// ConvertToTable renders Locations as `kubectl get locations` shows them, with the column
// definitions of tableColumns (unless the table options ask for no headers), as
// k8s.io/apiserver's default TableConvertor does for names only. Any other object is a 406.
func (r *REST) ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return convertToTable(ctx, obj, tableOptions, time.Now())
}

// convertToTable is ConvertToTable with ages measured at now.
func convertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object, now time.Time) (*metav1.Table, error) {
	table := &metav1.Table{}
	row := func(o runtime.Object) error {
		l, ok := o.(*mapper.Location)
		if !ok {
			return notAcceptable(o)
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells(l, now), Object: runtime.RawExtension{Object: l}})
		return nil
	}
	var err error
	if meta.IsListType(obj) {
		err = meta.EachListItem(obj, row)
	} else {
		err = row(obj)
	}
	if err != nil {
		return nil, err
	}
	if m, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
		table.Continue = m.GetContinue()
		table.RemainingItemCount = m.GetRemainingItemCount()
	} else if m, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	if opt, ok := tableOptions.(*metav1.TableOptions); !ok || !opt.NoHeaders {
		table.ColumnDefinitions = tableColumns
	}
	return table, nil
}

// notAcceptable is the 406 of an object that is not a Location, with k8s.io/apiserver's
// message for a resource that cannot be rendered as a Table.
func notAcceptable(o runtime.Object) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReason("NotAcceptable"),
		Message: fmt.Sprintf("%T cannot be converted to a Table of %s", o, mapper.Resource("locations")),
	}}
}

// cells returns a Location's row, in the order of tableColumns.
func cells(l *mapper.Location, now time.Time) []interface{} {
	s := l.Status
	ready, mode, inSync, heartbeat := none, none, interface{}(none), none
	if c := meta.FindStatusCondition(s.Conditions, controlv1alpha1.SyncTargetReady); c != nil {
		ready = string(c.Status)
	}
	if s.Mapper != nil && s.Mapper.Mode != "" {
		mode = s.Mapper.Mode
	}
	if s.Verified != nil {
		inSync = s.Verified.InSync
	}
	if s.HeartbeatTime != nil {
		heartbeat = since(s.HeartbeatTime.Time, now)
	}
	return []interface{}{
		l.Name, ready, mode, s.Objects, s.Deleting, inSync, s.Watchers, heartbeat, paused(s), since(l.CreationTimestamp.Time, now),
		labels.FormatLabels(l.Labels), capacity(s.Capacity),
	}
}

// paused renders the Paused column: "true" for a paused location, else its halted resources
// joined by commas ("configmaps,widgets.example.com"), else "false"; "<none>" for a location
// without a SyncTarget.
func paused(s mapper.LocationStatus) string {
	switch {
	case !s.Registered:
		return none
	case s.Paused:
		return "true"
	case len(s.HaltedResources) > 0:
		return strings.Join(s.HaltedResources, ",")
	}
	return "false"
}

// capacity renders cpu, memory and pods of a capacity as "cpu=4,memory=16Gi,pods=110",
// leaving out those not given; "<none>" when none is.
func capacity(c corev1.ResourceList) string {
	var parts []string
	for _, name := range capacityResources {
		if q, ok := c[name]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
		}
	}
	if len(parts) == 0 {
		return none
	}
	return strings.Join(parts, ",")
}

// since renders how long before now t was, as kubectl's AGE column does; "<unknown>" for the
// zero time, as kube-apiserver's printers.
func since(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
