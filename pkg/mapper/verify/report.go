package verify

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// Invariants are the numbered invariants of docs/design.md that a Report checks, with the text the
// report prints for each.
var Invariants = []struct {
	Number      int
	Description string
}{
	{1, "every object assigned to the location exists on the target, up to date"},
	{2, "every target object the mapper manages carries metadata naming its source"},
	{3, "every target status whose source opted in is reflected in the source"},
	{4, "no managed target object exists that no source object assigns"},
}

// Violation is one broken invariant for one object.
type Violation struct {
	// Invariant is the number of the invariant (1–4).
	Invariant int `json:"invariant"`
	// Resource is the GroupResource ("configmaps", "deployments.apps").
	Resource string `json:"resource"`
	// Cluster is the logical cluster of the source object; empty when the violation names no
	// source (invariant 2: a target object without source annotations).
	Cluster string `json:"cluster,omitempty"`
	// Source is the source object as "cluster|namespace/name", when known.
	Source string `json:"source,omitempty"`
	// Target is the target object as "namespace/name" (or "name"), when there is one.
	Target string `json:"target,omitempty"`
	// Message says what is wrong.
	Message string `json:"message"`
}

// Kept is a managed target object that the view did not list but is no orphan either: the view
// does not confirm that its source is gone (mapper.GoneFromView answered an error: 503 for an
// object the view withholds because its rendering fails, 429 while its resource has not synced).
// The mapper keeps such a copy, and so does the report: it is no violation.
type Kept struct {
	// Resource is the GroupResource.
	Resource string `json:"resource"`
	// Cluster is the logical cluster of the source object.
	Cluster string `json:"cluster"`
	// Source is the source object as "cluster|namespace/name".
	Source string `json:"source"`
	// Target is the target object as "namespace/name" (or "name").
	Target string `json:"target"`
	// Message says why the copy is kept, with the view's answer.
	Message string `json:"message"`
}

// ClusterReport is the part of a Report about one logical cluster of the source.
type ClusterReport struct {
	// Name is the logical cluster (kcp.io/cluster of the view objects).
	Name string `json:"name"`
	// Assigned is the number of the cluster's mapped objects in the view.
	Assigned int `json:"assigned"`
	// InSync is the number of those with no violation of invariant 1 or 3: the copy exists at
	// its place, is the mapper's, is up to date, and its status is reflected.
	InSync int `json:"inSync"`
	// Violations is the number of violations that name the cluster (Violation.Cluster),
	// orphans of invariant 4 included.
	Violations int `json:"violations"`
}

// Report is the result of Run: what was compared and every violation found.
type Report struct {
	// Location is the verified location.
	Location string `json:"location"`
	// NamespaceMapping is the mapping the comparison used ("same" or "prefixed"), and
	// NamespaceMappingReason why: "set explicitly", or for --namespace-mapping=auto "auto: "
	// and the reason mapper.ResolveNamespaceMapping gave.
	NamespaceMapping       string `json:"namespaceMapping"`
	NamespaceMappingReason string `json:"namespaceMappingReason"`
	// Resources are the compared resources (GroupResource strings).
	Resources []string `json:"resources"`
	// ViewObjects is the number of mapped objects in the view; ManagedObjects the number of
	// target objects labelled with the location.
	ViewObjects    int `json:"viewObjects"`
	ManagedObjects int `json:"managedObjects"`
	// Clusters are the per-cluster counts, sorted by name: every cluster that has objects in
	// the view or is named by a violation.
	Clusters []ClusterReport `json:"clusters"`
	// Violations are sorted by invariant, resource, source and target.
	Violations []Violation `json:"violations"`
	// Total is len(Violations).
	Total int `json:"total"`
	// Kept are the copies the view did not list but that are no orphans (Kept), sorted by
	// resource, source and target.
	Kept []Kept `json:"kept,omitempty"`
}

// add appends a violation.
func (r *Report) add(v Violation) { r.Violations = append(r.Violations, v) }

// Cluster returns the counts of the logical cluster name, and whether the report has any.
func (r *Report) Cluster(name string) (ClusterReport, bool) {
	for _, c := range r.Clusters {
		if c.Name == name {
			return c, true
		}
	}
	return ClusterReport{}, false
}

// finish sets Clusters from clusters (sorted by name), sorts the violations and sets Total.
func (r *Report) finish(clusters map[string]*ClusterReport) {
	r.Clusters = make([]ClusterReport, 0, len(clusters))
	for _, c := range clusters {
		r.Clusters = append(r.Clusters, *c)
	}
	sort.Slice(r.Clusters, func(i, j int) bool { return r.Clusters[i].Name < r.Clusters[j].Name })
	slices.SortFunc(r.Violations, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Invariant, b.Invariant), compareObjects(a.Resource, a.Source, a.Target, b.Resource, b.Source, b.Target))
	})
	if r.Violations == nil {
		r.Violations = []Violation{}
	}
	slices.SortFunc(r.Kept, func(a, b Kept) int {
		return compareObjects(a.Resource, a.Source, a.Target, b.Resource, b.Source, b.Target)
	})
	r.Total = len(r.Violations)
}

// compareObjects orders two entries of a report by resource, source and target.
func compareObjects(resourceA, sourceA, targetA, resourceB, sourceB, targetB string) int {
	return cmp.Or(strings.Compare(resourceA, resourceB), strings.Compare(sourceA, sourceB), strings.Compare(targetA, targetB))
}

// Count returns the number of violations of invariant n.
func (r *Report) Count(n int) int {
	c := 0
	for _, v := range r.Violations {
		if v.Invariant == n {
			c++
		}
	}
	return c
}

// WriteText writes the report for people: a summary line, the namespace mapping, one line per
// logical cluster ("cluster <name>: <n> assigned, <n> in sync, <n> violations"), then per
// invariant its violation count and one indented line per violation (the source names the
// cluster: "cluster|namespace/name"), one line per kept copy ("kept (no violation): ..."), then
// the total.
func (r *Report) WriteText(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "location %s: %d resources, %d assigned objects, %d managed target objects\n",
		r.Location, len(r.Resources), r.ViewObjects, r.ManagedObjects); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "namespace mapping %s (%s)\n", r.NamespaceMapping, r.NamespaceMappingReason); err != nil {
		return err
	}
	for _, c := range r.Clusters {
		if _, err := fmt.Fprintf(w, "cluster %s: %d assigned, %d in sync, %d violations\n", c.Name, c.Assigned, c.InSync, c.Violations); err != nil {
			return err
		}
	}
	for _, inv := range Invariants {
		if _, err := fmt.Fprintf(w, "invariant %d (%s): %d violations\n", inv.Number, inv.Description, r.Count(inv.Number)); err != nil {
			return err
		}
		for _, v := range r.Violations {
			if v.Invariant != inv.Number {
				continue
			}
			line := "  " + v.Resource
			if v.Source != "" {
				line += " source " + v.Source
			}
			if v.Target != "" {
				line += " target " + v.Target
			}
			if _, err := fmt.Fprintf(w, "%s: %s\n", line, v.Message); err != nil {
				return err
			}
		}
	}
	for _, k := range r.Kept {
		if _, err := fmt.Fprintf(w, "kept (no violation): %s source %s target %s: %s\n", k.Resource, k.Source, k.Target, k.Message); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "total: %d violations\n", r.Total)
	return err
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
