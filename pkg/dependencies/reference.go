package dependencies

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The resources that Pod templates reference.
var (
	ConfigMaps               = schema.GroupResource{Resource: "configmaps"}
	Secrets                  = schema.GroupResource{Resource: "secrets"}
	ServiceAccounts          = schema.GroupResource{Resource: "serviceaccounts"}
	PersistentVolumeClaims   = schema.GroupResource{Resource: "persistentvolumeclaims"}
	Services                 = schema.GroupResource{Resource: "services"}
	HorizontalPodAutoscalers = schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}
	PodDisruptionBudgets     = schema.GroupResource{Group: "policy", Resource: "poddisruptionbudgets"}
)

// Reference names an object of the referencing object's namespace (and logical cluster).
type Reference struct {
	// Resource is the referenced object's resource.
	Resource schema.GroupResource
	// Name is its name.
	Name string
	// Optional is true when every mention of the object is marked optional (a ConfigMap or
	// Secret with optional: true): its absence is not a missing dependency.
	Optional bool
}

// String returns resource/name, e.g. "configmaps/settings" or "widgets.example.com/w".
func (r Reference) String() string { return r.Resource.String() + "/" + r.Name }

// compare orders references by resource, then name.
func compare(a, b Reference) int {
	if c := strings.Compare(a.Resource.String(), b.Resource.String()); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// collector gathers references without duplicates; an object mentioned once as required is
// required.
type collector struct {
	refs map[[2]string]*Reference
}

// add records a reference to name of resource; an empty name is no reference.
func (c *collector) add(resource schema.GroupResource, name string, optional bool) {
	if name == "" {
		return
	}
	if c.refs == nil {
		c.refs = map[[2]string]*Reference{}
	}
	k := [2]string{resource.String(), name}
	if r, ok := c.refs[k]; ok {
		r.Optional = r.Optional && optional
		return
	}
	c.refs[k] = &Reference{Resource: resource, Name: name, Optional: optional}
}

// list returns the references sorted by resource and name.
func (c *collector) list() []Reference {
	out := make([]Reference, 0, len(c.refs))
	for _, r := range c.refs {
		out = append(out, *r)
	}
	slices.SortFunc(out, compare)
	return out
}

// Merge returns the references of lists without duplicates (required wins over optional),
// sorted by resource and name.
func Merge(lists ...[]Reference) []Reference {
	var c collector
	for _, l := range lists {
		for _, r := range l {
			c.add(r.Resource, r.Name, r.Optional)
		}
	}
	return c.list()
}
