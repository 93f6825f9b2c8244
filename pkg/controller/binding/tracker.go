package binding

import (
	"maps"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/informers"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// Tracker keeps the locationbinding.Index of the source's LocationBindings over its
// SyncTargets, from the process's shared informers. The Index is rebuilt on first use after a
// change of a LocationBinding's spec or a SyncTarget's labels (a SyncTarget's status, written
// every minute per location, changes nothing). A nil *Tracker is the Open mode: Index returns
// nil (every location bound) and HasSynced true. Safe for concurrent use.
type Tracker struct {
	bindings, targets toolscache.SharedIndexInformer

	// changed counts the informer events that may change the Index; the Index is rebuilt when
	// it moved since builtAt. The informers store an object before calling handlers, so a
	// reader that loads changed before listing never keeps an Index older than the count.
	changed atomic.Uint64

	mu       sync.Mutex
	index    *locationbinding.Index
	builtAt  uint64
	onChange []func()
}

// NewTracker returns a Tracker over the Set's informers of LocationBindings and SyncTargets
// (started with the Set).
func NewTracker(set *informers.Set) *Tracker {
	t := &Tracker{bindings: set.Informer(locationbinding.Resource), targets: set.Informer(synctarget.Resource)}
	t.changed.Store(1)
	bump := func(interface{}) { t.bump() }
	_, _ = t.bindings.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: bump, DeleteFunc: bump,
		UpdateFunc: func(old, obj interface{}) {
			if !sameBinding(old, obj) {
				t.bump()
			}
		},
	})
	_, _ = t.targets.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: bump, DeleteFunc: bump,
		UpdateFunc: func(old, obj interface{}) {
			if !sameLabels(old, obj) {
				t.bump()
			}
		},
	})
	return t
}

// AddBindingHandler adds handler to the LocationBinding informer (for a controller that
// reconciles per namespace: a binding's namespace is the one whose bound locations it
// changes). Call before the informers start.
func (t *Tracker) AddBindingHandler(handler toolscache.ResourceEventHandler) {
	_, _ = t.bindings.AddEventHandler(handler)
}

// OnChange registers fn, called (from an informer's goroutine: it must not block) after every
// change that may change the Index. Call before the informers start.
func (t *Tracker) OnChange(fn func()) { t.onChange = append(t.onChange, fn) }

// bump records a change and tells the OnChange functions.
func (t *Tracker) bump() {
	t.changed.Add(1)
	for _, fn := range t.onChange {
		fn()
	}
}

// HasSynced reports whether both informers have listed once (always true for a nil Tracker).
// Until then the Index may bind too little: callers wait, so that nothing is taken off a
// location because a binding was not seen yet.
func (t *Tracker) HasSynced() bool {
	return t == nil || (t.bindings.HasSynced() && t.targets.HasSynced())
}

// Index returns the current Index; nil for a nil Tracker (the Open mode: every location is
// bound). Read only, shared.
func (t *Tracker) Index() *locationbinding.Index {
	if t == nil {
		return nil
	}
	at := t.changed.Load()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.index != nil && t.builtAt == at {
		return t.index
	}
	var bindings []*locationbinding.Binding
	for _, obj := range t.bindings.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			var lb controlv1alpha1.LocationBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &lb); err == nil {
				bindings = append(bindings, locationbinding.CompileObject(keyOf(u), &lb))
			}
		}
	}
	var locs []locationbinding.Location
	for _, obj := range t.targets.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			locs = append(locs, locationbinding.Location{Name: u.GetName(), Labels: u.GetLabels()})
		}
	}
	t.index, t.builtAt = locationbinding.NewIndex(bindings, locs), at
	return t.index
}

// Bindings returns the LocationBindings the informer holds (shared: read only).
func (t *Tracker) Bindings() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range t.bindings.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out
}

// keyOf returns the key of a LocationBinding (its kcp.io/cluster, "" on a plain source, as
// the other controllers of mapper-controller name clusters).
func keyOf(u *unstructured.Unstructured) locationbinding.Key {
	return locationbinding.Key{Cluster: u.GetAnnotations()[contract.ClusterAnnotation], Namespace: u.GetNamespace(), Name: u.GetName()}
}

// sameBinding reports whether two versions of a LocationBinding bind alike: the same spec,
// both or neither being deleted (its status, which the Controller writes, does not matter).
func sameBinding(old, obj interface{}) bool {
	a, okA := old.(*unstructured.Unstructured)
	b, okB := obj.(*unstructured.Unstructured)
	if !okA || !okB {
		return false
	}
	specA, _, _ := unstructured.NestedFieldNoCopy(a.Object, "spec")
	specB, _, _ := unstructured.NestedFieldNoCopy(b.Object, "spec")
	return (a.GetDeletionTimestamp() == nil) == (b.GetDeletionTimestamp() == nil) && equality.Semantic.DeepEqual(specA, specB)
}

// sameLabels reports whether two versions of a SyncTarget have the same labels.
func sameLabels(old, obj interface{}) bool {
	a, okA := old.(*unstructured.Unstructured)
	b, okB := obj.(*unstructured.Unstructured)
	return okA && okB && maps.Equal(a.GetLabels(), b.GetLabels())
}
