package kubectlmapper

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	ctrldependencies "github.com/cluster-mapper/cluster-mapper/pkg/controller/dependencies"
	ctrlplacement "github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
)

// Values of ObjectLocation.AssignedBy besides "Placement/<name>".
const (
	// AssignedByDependency: the dependency controller assigned the location (it is in the
	// object's control.mapper.kcp.io/dependency-locations), following an object that
	// references this one (docs/dependencies.md).
	AssignedByDependency = "Dependency"
	// AssignedByHand: someone else wrote the location into kcp.io/assigned-locations.
	AssignedByHand = "Hand"
	// AssignedByPlacementPrefix followed by a Placement's name: the Placement of the object's
	// namespace that wrote its assignment (control.mapper.kcp.io/placement).
	AssignedByPlacementPrefix = "Placement/"
)

// ObjectLocation is what a source object says about one of its locations: every location it
// is assigned to, carries the finalizer of, or has an outcome or status record of.
type ObjectLocation struct {
	// Location is the location's name.
	Location string `json:"location"`
	// Assigned is whether kcp.io/assigned-locations names the location, and AssignedBy who
	// wrote that: "Placement/<name>", "Dependency" or "Hand"; empty when not assigned.
	Assigned   bool   `json:"assigned"`
	AssignedBy string `json:"assignedBy,omitempty"`
	// Outcome is the location's apply outcome record (outcome.kcp.io/<location>): why it
	// does not apply the object; nil when it has none, which means the location reports no
	// failure. OutcomeError says why a record that exists cannot be read.
	Outcome      *contract.OutcomeRecord `json:"outcome,omitempty"`
	OutcomeError string                  `json:"outcomeError,omitempty"`
	// Status summarizes the location's status record (status.kcp.io/<location>): the ready
	// and desired replicas, else the conditions, else "recorded"; empty without a record.
	Status string `json:"status,omitempty"`
	// Finalizer is whether the object carries the location's finalizer
	// (locations.mapper.kcp.io/<location>): the location holds a copy, or is about to.
	Finalizer bool `json:"finalizer"`
	// DeletionPending is whether the location has a copy to delete before it releases its
	// finalizer: the object carries the finalizer and is no longer assigned to the location
	// or is being deleted (docs/views.md, "Deletion").
	DeletionPending bool `json:"deletionPending"`
}

// ObjectLocations returns the locations of obj, a source object, sorted by name: those in its
// kcp.io/assigned-locations, in its location finalizers, and in its outcome and status
// records. An assignment that does not parse is none, as for the views.
func ObjectLocations(obj metav1.Object) []ObjectLocation {
	ann := obj.GetAnnotations()
	names := sets.New[string]()
	assigned := sets.New[string]()
	if v, ok := ann[contract.AssignedLocationsAnnotation]; ok {
		if locs, err := contract.ParseLocations(v); err == nil {
			assigned.Insert(locs...)
		}
	}
	byDependency := sets.New[string]()
	if v, ok := ann[ctrldependencies.LocationsAnnotation]; ok {
		if locs, err := contract.ParseLocations(v); err == nil {
			byDependency.Insert(locs...)
		}
	}
	finalizers := sets.New[string]()
	for _, f := range obj.GetFinalizers() {
		if l, ok := contract.FinalizerLocation(f); ok {
			finalizers.Insert(l)
		}
	}
	names = names.Union(assigned).Union(finalizers)
	names.Insert(contract.OutcomeRecordLocations(ann)...)
	names.Insert(contract.StatusRecordLocations(ann)...)

	deleting := obj.GetDeletionTimestamp() != nil
	out := make([]ObjectLocation, 0, names.Len())
	for _, l := range sets.List(names) {
		ol := ObjectLocation{Location: l, Assigned: assigned.Has(l), Finalizer: finalizers.Has(l)}
		switch {
		case !ol.Assigned:
		case byDependency.Has(l):
			ol.AssignedBy = AssignedByDependency
		case ann[ctrlplacement.OwnerAnnotation] != "":
			ol.AssignedBy = AssignedByPlacementPrefix + ann[ctrlplacement.OwnerAnnotation]
		default:
			ol.AssignedBy = AssignedByHand
		}
		ol.DeletionPending = ol.Finalizer && (!ol.Assigned || deleting)
		if v, ok := ann[contract.OutcomeAnnotation(l)]; ok {
			if r, err := contract.ParseOutcomeRecord(v); err != nil {
				ol.OutcomeError = err.Error()
			} else {
				ol.Outcome = &r
			}
		}
		if status, ok, err := contract.StatusRecord(ann, l); ok {
			if err != nil {
				ol.Status = "unreadable: " + err.Error()
			} else {
				ol.Status = StatusSummary(status)
			}
		}
		out = append(out, ol)
	}
	return out
}

// StatusSummary renders a status record in a few words: "<ready>/<replicas> ready" for a
// replica kind (status.replicas), else its conditions as "Type=Status" joined by commas, else
// "recorded".
func StatusSummary(status map[string]interface{}) string {
	if replicas, ok, _ := unstructured.NestedFieldNoCopy(status, "replicas"); ok {
		ready, _, _ := unstructured.NestedFieldNoCopy(status, "readyReplicas")
		if ready == nil {
			ready = int64(0)
		}
		return fmt.Sprintf("%v/%v ready", ready, replicas)
	}
	if conditions, ok, _ := unstructured.NestedSlice(status, "conditions"); ok && len(conditions) > 0 {
		parts := make([]string, 0, len(conditions))
		for _, c := range conditions {
			m, ok := c.(map[string]interface{})
			if !ok {
				continue
			}
			parts = append(parts, fmt.Sprintf("%v=%v", m["type"], m["status"]))
		}
		sort.Strings(parts)
		return strings.Join(parts, ",")
	}
	return "recorded"
}

// whereColumns are the columns of `kubectl mapper where`; priority 1 columns are shown by -o
// wide only.
var whereColumns = []metav1.TableColumnDefinition{
	{Name: "Location", Type: "string", Format: "name", Description: "The location"},
	{Name: "Assigned-By", Type: "string", Description: "Placement/<name>, Dependency or Hand; <none> when not assigned"},
	{Name: "Outcome", Type: "string", Description: "Reason of the location's outcome record: why it does not apply the object; <none> when it reports no failure"},
	{Name: "Status", Type: "string", Description: "Summary of the location's status record"},
	{Name: "Deletion", Type: "string", Description: "Pending when the location has a copy to delete before it releases its finalizer"},
	{Name: "Finalizer", Type: "string", Priority: 1, Description: "Whether the object carries the location's finalizer"},
	{Name: "Since", Type: "string", Priority: 1, Description: "Time since the location first saw its outcome"},
	{Name: "Message", Type: "string", Priority: 1, Description: "Message of the outcome record"},
}

// whereRow returns the cells of l, in the order of whereColumns, with ages measured at now.
func whereRow(l ObjectLocation, now time.Time) []interface{} {
	assignedBy, outcome, status, deletion, since, message := none, none, none, none, none, none
	if l.AssignedBy != "" {
		assignedBy = l.AssignedBy
	}
	if l.Status != "" {
		status = l.Status
	}
	if l.DeletionPending {
		deletion = "Pending"
	}
	switch {
	case l.Outcome != nil:
		outcome, message = l.Outcome.Reason, l.Outcome.Message
		if t, err := time.Parse(time.RFC3339, l.Outcome.Time); err == nil {
			since = age(&t, now)
		}
	case l.OutcomeError != "":
		outcome, message = "Unreadable", l.OutcomeError
	}
	return []interface{}{l.Location, assignedBy, outcome, status, deletion, fmt.Sprint(l.Finalizer), since, message}
}

// newWhereCommand returns `kubectl mapper where RESOURCE/NAME`.
func newWhereCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	out := newOutput()
	cmd := &cobra.Command{
		Use:   "where (RESOURCE/NAME | RESOURCE NAME)",
		Short: "Show where an object is mapped: per location, who assigned it, why it did not apply, its status, deletion",
		Long: "Read one source object and show, for every location it is assigned to or held by: who assigned it " +
			"(a Placement, a dependency, or by hand), the location's apply outcome record (outcome.kcp.io/<location>: " +
			"why it does not apply the object; none means it reports no failure), a summary of its status record " +
			"(status.kcp.io/<location>), and whether a deletion is pending there (the location's finalizer is on " +
			"an object unassigned from it or being deleted).",
		Example: "  kubectl mapper where deployments/web -n apps\n  kubectl mapper where configmap settings -n apps -o json",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			resource, name, err := resourceAndName(args)
			if err != nil {
				return err
			}
			obj, err := getObject(cmd.Context(), flags, resource, name)
			if err != nil {
				return err
			}
			now := time.Now()
			table := &metav1.Table{ColumnDefinitions: whereColumns}
			var items []*unstructured.Unstructured
			for _, l := range ObjectLocations(obj) {
				item, err := toItem("ObjectLocation", &l)
				if err != nil {
					return err
				}
				item.SetName(l.Location)
				items = append(items, item)
				table.Rows = append(table.Rows, metav1.TableRow{Cells: whereRow(l, now), Object: runtime.RawExtension{Object: item}})
			}
			if len(items) == 0 && (out.format() == "" || out.format() == "wide") {
				_, err := fmt.Fprintf(streams.ErrOut, "%s is assigned to no location\n", name)
				return err
			}
			return out.print(streams.Out, table, items, false)
		},
	}
	out.addFlags(cmd)
	return cmd
}

// resourceAndName parses "RESOURCE/NAME" or "RESOURCE NAME", as kubectl get does for one
// object.
func resourceAndName(args []string) (string, string, error) {
	if len(args) == 2 {
		return args[0], args[1], nil
	}
	resource, name, ok := strings.Cut(args[0], "/")
	if !ok || resource == "" || name == "" {
		return "", "", fmt.Errorf("name one object as RESOURCE/NAME or RESOURCE NAME, not %q", args[0])
	}
	return resource, name, nil
}

// getObject reads the object name of resource (a resource name, short name or kind, with an
// optional group: "deploy", "deployments.apps", "Widget.example.com") from the source, in the
// namespace of the flags when the resource is namespaced.
func getObject(ctx context.Context, flags *genericclioptions.ConfigFlags, resource, name string) (*unstructured.Unstructured, error) {
	mapper, err := flags.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	mapping, err := restMapping(mapper, resource)
	if err != nil {
		return nil, err
	}
	c, err := newSourceClients(flags)
	if err != nil {
		return nil, err
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return c.dynamic.Resource(mapping.Resource).Get(ctx, name, metav1.GetOptions{})
	}
	ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, err
	}
	return c.dynamic.Resource(mapping.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// restMapping resolves resource as kubectl does: as a (short) resource name first, then as a
// kind.
func restMapping(mapper meta.RESTMapper, resource string) (*meta.RESTMapping, error) {
	fullySpecified, gr := schema.ParseResourceArg(resource)
	gvk := schema.GroupVersionKind{}
	if fullySpecified != nil {
		gvk, _ = mapper.KindFor(*fullySpecified)
	}
	if gvk.Empty() {
		var err error
		if gvk, err = mapper.KindFor(gr.WithVersion("")); err != nil {
			gk := schema.ParseGroupKind(resource)
			m, kindErr := mapper.RESTMapping(gk)
			if kindErr != nil {
				return nil, fmt.Errorf("the server does not have a resource type %q: %w", resource, err)
			}
			return m, nil
		}
	}
	return mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
}
