package kubectlmapper

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	mapperv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// LocationsResource is the GroupVersionResource of the Locations mapper-apiserver serves.
var LocationsResource = mapperv1alpha1.SchemeGroupVersion.WithResource("locations")

// LocationSummary is one location as `kubectl mapper locations` shows it: its Location (the
// counts mapper-apiserver computes, the SyncTarget's spec and status it copies, the Lease's
// renewTime) with the shards of its SyncTarget's status.
type LocationSummary struct {
	// Registered is whether the location has a SyncTarget.
	Registered bool `json:"registered"`
	// Ready and ReadyReason are the status and reason of the SyncTarget's Ready condition;
	// empty when it has none.
	Ready       string `json:"ready,omitempty"`
	ReadyReason string `json:"readyReason,omitempty"`
	// Mode is the active mapper's mode (Pull, Push); empty without a mapper.
	Mode string `json:"mode,omitempty"`
	// Identity and Version identify the active mapper.
	Identity string `json:"identity,omitempty"`
	Version  string `json:"version,omitempty"`
	// Shards is the number of mappers that share the location (status.shards of the
	// SyncTarget; 1 when one mapper reports for the whole location, 0 when none does), and
	// ShardsReady how many of them report Ready=True.
	Shards      int `json:"shards"`
	ShardsReady int `json:"shardsReady"`
	// Objects is the number of objects in the location's view (assigned, or waiting for the
	// location to delete its copy), and Deleting the latter.
	Objects  int64 `json:"objects"`
	Deleting int64 `json:"deleting"`
	// InSync and Failing are the counts of the mapper's latest verification: the assigned
	// objects without a violation, and the violations; nil before any verification.
	InSync  *int64 `json:"inSync,omitempty"`
	Failing *int64 `json:"failing,omitempty"`
	// RenderFailures is the number of the location's objects that a Customization fails to
	// render (the view withholds them).
	RenderFailures int64 `json:"renderFailures,omitempty"`
	// Paused is the SyncTarget's spec.paused, HaltedResources its spec.haltedResources.
	Paused          bool     `json:"paused"`
	HaltedResources []string `json:"haltedResources,omitempty"`
	// ResourcesCompatible and ResourcesCompatibleMessage are the status and message of the
	// SyncTarget's ResourcesCompatible condition (whether the target serves every resource
	// the view serves, and which it does not); empty when it has none.
	ResourcesCompatible        string `json:"resourcesCompatible,omitempty"`
	ResourcesCompatibleMessage string `json:"resourcesCompatibleMessage,omitempty"`
	// HeartbeatTime is the renewTime of the location's Lease; nil without a Lease.
	HeartbeatTime *metav1.MicroTime `json:"heartbeatTime,omitempty"`
}

// SummarizeLocation returns the summary of l; st is its SyncTarget, nil when it has none or
// it could not be read (then Shards comes from l's mapper alone).
func SummarizeLocation(l *mapperv1alpha1.Location, st *controlv1alpha1.SyncTarget) LocationSummary {
	s := l.Status
	out := LocationSummary{
		Registered: s.Registered, Objects: s.Objects, Deleting: s.Deleting,
		Paused: s.Paused, HaltedResources: s.HaltedResources, HeartbeatTime: s.HeartbeatTime,
	}
	if c := meta.FindStatusCondition(s.Conditions, controlv1alpha1.SyncTargetReady); c != nil {
		out.Ready, out.ReadyReason = string(c.Status), c.Reason
	}
	if c := meta.FindStatusCondition(s.Conditions, controlv1alpha1.SyncTargetResourcesCompatible); c != nil {
		out.ResourcesCompatible, out.ResourcesCompatibleMessage = string(c.Status), c.Message
	}
	if s.Mapper != nil {
		out.Mode, out.Identity, out.Version = s.Mapper.Mode, s.Mapper.Identity, s.Mapper.Version
		out.Shards = 1
		if out.Ready == string(metav1.ConditionTrue) {
			out.ShardsReady = 1
		}
	}
	if v := s.Verified; v != nil {
		inSync, failing := v.InSync, v.InViolation
		out.InSync, out.Failing = &inSync, &failing
	}
	for _, f := range s.CustomizationFailures {
		out.RenderFailures += f.FailingObjects
	}
	if st != nil && len(st.Status.Shards) > 0 {
		out.Shards, out.ShardsReady = len(st.Status.Shards), 0
		for _, sh := range st.Status.Shards {
			if sh.Ready == metav1.ConditionTrue {
				out.ShardsReady++
			}
		}
	}
	return out
}

// locationColumns are the columns of `kubectl mapper locations`; priority 1 columns are shown
// by -o wide only.
var locationColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the location"},
	{Name: "Ready", Type: "string", Description: "Status of the SyncTarget's Ready condition"},
	{Name: "Mode", Type: "string", Description: "Mode of the location's mapper (Pull, Push)"},
	{Name: "Shards", Type: "string", Description: "Ready mappers / mappers sharing the location"},
	{Name: "Objects", Type: "integer", Description: "Objects in the location's view"},
	{Name: "In-Sync", Type: "string", Description: "Assigned objects without a violation at the latest verification"},
	{Name: "Failing", Type: "string", Description: "Violations at the latest verification"},
	{Name: "Paused", Type: "string", Description: "true (spec.paused), the halted resources (spec.haltedResources), or false"},
	{Name: "Heartbeat", Type: "string", Description: "Time since the location's Lease was renewed"},
	{Name: "Reason", Type: "string", Priority: 1, Description: "Reason of the Ready condition"},
	{Name: "Compatible", Type: "string", Priority: 1, Description: "Status of the SyncTarget's ResourcesCompatible condition: whether the target serves every resource of the view"},
	{Name: "Deleting", Type: "integer", Priority: 1, Description: "Objects waiting for the location to delete its copy"},
	{Name: "Render-Failures", Type: "integer", Priority: 1, Description: "Objects a Customization fails to render for the location"},
	{Name: "Mapper", Type: "string", Priority: 1, Description: "Identity of the active mapper"},
	{Name: "Version", Type: "string", Priority: 1, Description: "Build version of the active mapper"},
}

// locationRow returns the cells of s (named name), in the order of locationColumns, with
// ages measured at now.
func locationRow(name string, s LocationSummary, now time.Time) []interface{} {
	orNone := func(v string) string {
		if v == "" {
			return none
		}
		return v
	}
	count := func(p *int64) string {
		if p == nil {
			return none
		}
		return fmt.Sprint(*p)
	}
	paused := "false"
	switch {
	case !s.Registered:
		paused = none
	case s.Paused:
		paused = "true"
	case len(s.HaltedResources) > 0:
		paused = strings.Join(s.HaltedResources, ",")
	}
	var heartbeat *time.Time
	if s.HeartbeatTime != nil {
		heartbeat = &s.HeartbeatTime.Time
	}
	return []interface{}{
		name, orNone(s.Ready), orNone(s.Mode), fmt.Sprintf("%d/%d", s.ShardsReady, s.Shards), s.Objects,
		count(s.InSync), count(s.Failing), paused, age(heartbeat, now),
		orNone(s.ReadyReason), orNone(s.ResourcesCompatible), s.Deleting, s.RenderFailures, orNone(s.Identity), orNone(s.Version),
	}
}

// newLocationsCommand returns `kubectl mapper locations [NAME...]`.
func newLocationsCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	out := newOutput()
	cmd := &cobra.Command{
		Use:   "locations [NAME...]",
		Short: "List locations: Ready, mode, shards, objects in sync and failing, paused, last heartbeat",
		Long: "List the registered locations (or the named ones) as mapper-apiserver reports them " +
			"(kubectl get locations), with the shards of their SyncTargets: Ready and its reason, the mapper's " +
			"mode, ready shards / shards, the objects in the location's view, those in sync and the violations " +
			"at the mapper's latest verification, whether the location is paused (or the resources it halts), " +
			"and the time since its mapper last renewed its Lease.",
		Example: "  kubectl mapper locations\n  kubectl mapper locations east -o wide\n  kubectl mapper locations -o json",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			c, err := newSourceClients(flags)
			if err != nil {
				return err
			}
			items, table, err := listLocations(cmd.Context(), c, args, streams, time.Now())
			if err != nil {
				return err
			}
			return out.print(streams.Out, table, items, len(args) == 1)
		},
	}
	out.addFlags(cmd)
	return cmd
}

// listLocations reads the Locations (all registered ones, or names) and the SyncTargets and
// returns them as output items and as a table. A SyncTarget that cannot be read leaves its
// location's shards to its Location (with a warning on streams.ErrOut).
func listLocations(ctx context.Context, c *sourceClients, names []string, streams genericiooptions.IOStreams, now time.Time) ([]*unstructured.Unstructured, *metav1.Table, error) {
	var locations []mapperv1alpha1.Location
	if len(names) == 0 {
		list, err := c.dynamic.Resource(LocationsResource).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("listing locations (is mapper-apiserver registered as an APIService of this cluster?): %w", err)
		}
		for i := range list.Items {
			l, err := toLocation(&list.Items[i])
			if err != nil {
				return nil, nil, err
			}
			locations = append(locations, *l)
		}
	} else {
		for _, n := range names {
			u, err := c.dynamic.Resource(LocationsResource).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return nil, nil, err
			}
			l, err := toLocation(u)
			if err != nil {
				return nil, nil, err
			}
			locations = append(locations, *l)
		}
	}
	sort.Slice(locations, func(i, j int) bool { return locations[i].Name < locations[j].Name })

	syncTargets := map[string]*controlv1alpha1.SyncTarget{}
	list, err := c.dynamic.Resource(synctarget.Resource).List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
		for i := range list.Items {
			st, err := synctarget.FromUnstructured(&list.Items[i])
			if err != nil {
				return nil, nil, err
			}
			syncTargets[st.Name] = st
		}
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
		fmt.Fprintf(streams.ErrOut, "Warning: cannot list SyncTargets, the shards are those of the Locations: %v\n", err)
	default:
		return nil, nil, fmt.Errorf("listing SyncTargets: %w", err)
	}

	table := &metav1.Table{ColumnDefinitions: locationColumns}
	items := make([]*unstructured.Unstructured, 0, len(locations))
	for i := range locations {
		l := &locations[i]
		s := SummarizeLocation(l, syncTargets[l.Name])
		item, err := toItem("LocationSummary", &s)
		if err != nil {
			return nil, nil, err
		}
		item.SetName(l.Name)
		items = append(items, item)
		table.Rows = append(table.Rows, metav1.TableRow{Cells: locationRow(l.Name, s, now), Object: runtime.RawExtension{Object: item}})
	}
	return items, table, nil
}

// toLocation converts a Location read with the dynamic client.
func toLocation(u *unstructured.Unstructured) (*mapperv1alpha1.Location, error) {
	l := &mapperv1alpha1.Location{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, l); err != nil {
		return nil, fmt.Errorf("decoding location %s: %w", u.GetName(), err)
	}
	return l, nil
}
