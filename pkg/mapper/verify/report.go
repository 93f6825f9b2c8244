package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// Invariants are the numbered invariants of DESIGN.md that a Report checks, with the text the
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
	// Source is the source object as "cluster|namespace/name", when known.
	Source string `json:"source,omitempty"`
	// Target is the target object as "namespace/name" (or "name"), when there is one.
	Target string `json:"target,omitempty"`
	// Message says what is wrong.
	Message string `json:"message"`
}

// Report is the result of Run: what was compared and every violation found.
type Report struct {
	// Location is the verified location.
	Location string `json:"location"`
	// Resources are the compared resources (GroupResource strings).
	Resources []string `json:"resources"`
	// ViewObjects is the number of mapped objects in the view; ManagedObjects the number of
	// target objects labelled with the location.
	ViewObjects    int `json:"viewObjects"`
	ManagedObjects int `json:"managedObjects"`
	// Violations are sorted by invariant, resource, source and target.
	Violations []Violation `json:"violations"`
	// Total is len(Violations).
	Total int `json:"total"`
}

// add appends a violation.
func (r *Report) add(v Violation) { r.Violations = append(r.Violations, v) }

// finish sorts the violations and sets Total.
func (r *Report) finish() {
	sort.Slice(r.Violations, func(i, j int) bool {
		a, b := r.Violations[i], r.Violations[j]
		if a.Invariant != b.Invariant {
			return a.Invariant < b.Invariant
		}
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		return a.Target < b.Target
	})
	if r.Violations == nil {
		r.Violations = []Violation{}
	}
	r.Total = len(r.Violations)
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

// WriteText writes the report for people: a summary line, then per invariant its violation
// count and one indented line per violation, then the total.
func (r *Report) WriteText(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "location %s: %d resources, %d assigned objects, %d managed target objects\n",
		r.Location, len(r.Resources), r.ViewObjects, r.ManagedObjects); err != nil {
		return err
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
	_, err := fmt.Fprintf(w, "total: %d violations\n", r.Total)
	return err
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
