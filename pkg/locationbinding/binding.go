package locationbinding

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// Resource is the GroupVersionResource of LocationBindings.
var Resource = controlv1alpha1.SchemeGroupVersion.WithResource("locationbindings")

// Mode is the location-access mode of mapper-apiserver and mapper-controller
// (--location-access, docs/tenancy.md).
type Mode string

const (
	// ModeBound (the default): an object is shown to, placed on and customized for only the
	// locations bound to its namespace by a LocationBinding.
	ModeBound Mode = "Bound"
	// ModeOpen: every object may go to every location it is assigned to, whoever wrote the
	// assignment. For a source with one tenant only (everyone who can write an object may use
	// every location).
	ModeOpen Mode = "Open"
)

// ParseMode returns the Mode named s ("Bound" or "Open"), or an error naming both.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeBound, ModeOpen:
		return m, nil
	}
	return "", fmt.Errorf("%q is not a location-access mode: use %q or %q", s, ModeBound, ModeOpen)
}

// ClusterScopedNamespace is the namespace whose LocationBindings bind the cluster-scoped
// objects of their logical cluster: the control plane's namespace, where only administrators
// write (docs/tenancy.md, "Cluster-scoped objects"). Without a LocationBinding there, no
// cluster-scoped object is shown to any location in the Bound mode.
const ClusterScopedNamespace = contract.ControlNamespace

// Key names a LocationBinding: its logical cluster, namespace and name.
type Key struct {
	Cluster, Namespace, Name string
}

// String returns "namespace/name", prefixed by "cluster|" when the cluster is set.
func (k Key) String() string {
	s := k.Namespace + "/" + k.Name
	if k.Cluster != "" {
		s = k.Cluster + "|" + s
	}
	return s
}

// Binding is one compiled LocationBinding: what it selects, as a pure function of a
// location's name and its SyncTarget's labels. It is immutable.
type Binding struct {
	// Key names the LocationBinding.
	Key Key
	// selector is spec.locationSelector (nil when unset).
	selector labels.Selector
	// names are spec.locationNames, sorted.
	names []string
	// err says why the spec is invalid; an invalid binding binds nothing.
	err error
}

// Compile returns the Binding of spec, the spec of the LocationBinding key. A selector that
// does not convert (metav1.LabelSelectorAsSelector: an invalid operator, key or value) makes
// a Binding that binds nothing, whose Err says why; the CRD's validation makes that rare.
func Compile(key Key, spec *controlv1alpha1.LocationBindingSpec) *Binding {
	b := &Binding{Key: key, names: slices.Clone(spec.LocationNames)}
	slices.Sort(b.names)
	b.names = slices.Compact(b.names)
	if spec.LocationSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(spec.LocationSelector)
		if err != nil {
			b.err = fmt.Errorf("spec.locationSelector: %w", err)
			return b
		}
		b.selector = sel
	}
	if b.selector == nil && len(b.names) == 0 {
		b.err = fmt.Errorf("spec: set locationSelector or locationNames")
	}
	return b
}

// CompileObject returns the Binding of the LocationBinding lb, whose key is key: Compile of
// its spec, or, for a LocationBinding marked for deletion (a deletionTimestamp), a Binding that
// binds nothing (an administrator deleting it means to take the access away; a finalizer must
// not keep it).
func CompileObject(key Key, lb *controlv1alpha1.LocationBinding) *Binding {
	if lb.DeletionTimestamp != nil {
		return &Binding{Key: key, err: fmt.Errorf("the LocationBinding is being deleted")}
	}
	return Compile(key, &lb.Spec)
}

// Err returns why the binding's spec is invalid (it then binds nothing); nil when valid.
func (b *Binding) Err() error { return b.err }

// Selects reports whether the binding binds the location name, whose SyncTarget has labels
// lbls when registered is true. A selector selects registered locations only; a name binds
// the location whether or not it is registered.
func (b *Binding) Selects(name string, lbls labels.Labels, registered bool) bool {
	if b.err != nil {
		return false
	}
	if _, found := slices.BinarySearch(b.names, name); found {
		return true
	}
	return registered && b.selector != nil && b.selector.Matches(lbls)
}

// Names returns spec.locationNames, sorted and de-duplicated (shared: read only).
func (b *Binding) Names() []string { return b.names }

// scope is a namespace of a logical cluster.
type scope struct {
	cluster, namespace string
}

// scopeOf returns the scope whose bindings bind an object of namespace in cluster: the
// namespace itself, or ClusterScopedNamespace for a cluster-scoped object (namespace "").
func scopeOf(cluster, namespace string) scope {
	if namespace == "" {
		namespace = ClusterScopedNamespace
	}
	return scope{cluster: cluster, namespace: namespace}
}
