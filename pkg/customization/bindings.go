package customization

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/clusterinformer"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
)

// In the Bound location-access mode (FollowerOptions.Access) the Follower also follows the
// source's LocationBindings, and every Snapshot carries the locationbinding.Index of them over
// the SyncTargets it holds (Snapshot.Bindings): the views show an object only to the locations
// bound to its namespace (pkg/cache), and so render it, with `location` in CEL, only for
// those. In the Open mode no LocationBinding is read and Bindings is nil (every location is
// bound).
//
// Safety: in the Bound mode the Follower counts as synced only once it has listed both the
// LocationBindings and the SyncTargets. A source where they cannot be listed (the CRD is
// missing, the server's identity may not list them) keeps the views unready (the cache waits
// for the first snapshot) instead of serving them empty: an empty view would make every mapper
// delete its copies.

// Bindings returns the bound locations of every namespace at this snapshot; nil in the Open
// mode (and for Empty()), which binds every location.
func (s *Snapshot) Bindings() *locationbinding.Index {
	if s == nil {
		return nil
	}
	return s.bindings
}

// WithBindings returns a copy of s (Empty() when s is nil) that binds with x: nil binds every
// location (the Open mode), an Index only the locations bound to each namespace. s is not
// changed.
func (s *Snapshot) WithBindings(x *locationbinding.Index) *Snapshot {
	c := *Empty()
	if s != nil {
		c = *s
	}
	c.bindings = x
	return &c
}

// newBindingInformer returns the informer of the source's LocationBindings, keyed like the
// others by logical cluster (clusters), whose changes make new snapshots.
func (f *Follower) newBindingInformer(dyn dynamic.Interface, clusters clusterinformer.Clusters) *clusterinformer.Informer {
	return clusterinformer.NewForResource(dyn, locationbinding.Resource, toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { f.setBinding(nil, obj) },
		UpdateFunc: f.setBinding,
		DeleteFunc: f.deleteBinding,
	}, clusterinformer.Options{Clusters: clusters, Transform: decodeLocationBinding,
		WatchErrorHandler: f.watchErrors(locationbinding.Resource, "LocationBindings", "the Bound location-access mode keeps the views unready until they are listed once, and the bindings last listed afterwards")})
}

// setBinding records an added LocationBinding, or an updated one whose spec or deletion
// changed (old is nil for an add).
func (f *Follower) setBinding(old, obj interface{}) {
	b, ok := obj.(*controlv1alpha1.LocationBinding)
	if !ok {
		return
	}
	if o, ok := old.(*controlv1alpha1.LocationBinding); ok && sameBindingInput(o, b) {
		return
	}
	f.mu.Lock()
	f.bindings[f.bindingKey(b)] = locationbinding.CompileObject(f.bindingKey(b), b)
	f.indexStale = true
	f.advance(b)
	f.mu.Unlock()
	f.signal()
}

// deleteBinding forgets a deleted LocationBinding.
func (f *Follower) deleteBinding(obj interface{}) {
	obj, rv := f.deleted(f.locationBindings, obj)
	b, ok := obj.(*controlv1alpha1.LocationBinding)
	if !ok {
		return
	}
	f.mu.Lock()
	delete(f.bindings, f.bindingKey(b))
	f.indexStale = true
	f.advanceTo(rv)
	f.mu.Unlock()
	f.signal()
}

// bindingKey returns the key of a LocationBinding: its logical cluster, namespace and name.
func (f *Follower) bindingKey(b *controlv1alpha1.LocationBinding) locationbinding.Key {
	return locationbinding.Key{Cluster: f.cluster(b), Namespace: b.Namespace, Name: b.Name}
}

// currentBindings returns the Index of the bindings over locs (the current locations), nil in
// the Open mode: the previous one unless a binding or a SyncTarget's labels changed since.
// Called with mu held.
func (f *Follower) currentBindings(locs []Location) *locationbinding.Index {
	if f.locationBindings == nil {
		return nil
	}
	if f.index == nil || f.indexStale {
		f.index, f.indexStale = f.bindingIndex(locs), false
	}
	return f.index
}

// bindingIndex returns the Index of the bindings over locs. Called with mu held.
func (f *Follower) bindingIndex(locs []Location) *locationbinding.Index {
	bindings := make([]*locationbinding.Binding, 0, len(f.bindings))
	for _, b := range f.bindings {
		bindings = append(bindings, b)
	}
	registered := make([]locationbinding.Location, len(locs))
	for i, l := range locs {
		registered[i] = locationbinding.Location{Name: l.Name, Labels: l.Labels}
	}
	return locationbinding.NewIndex(bindings, registered)
}

// sameBindingInput reports whether a and b bind alike: the same spec, both or neither being
// deleted. Their status (written by mapper-controller) does not matter.
func sameBindingInput(a, b *controlv1alpha1.LocationBinding) bool {
	return (a.DeletionTimestamp == nil) == (b.DeletionTimestamp == nil) && apiequality.Semantic.DeepEqual(a.Spec, b.Spec)
}

// decodeLocationBinding is the LocationBinding informer's transform: the Go type, without
// managedFields and status. One that does not decode is logged and dropped.
func decodeLocationBinding(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	b := &controlv1alpha1.LocationBinding{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b); err != nil {
		klog.ErrorS(err, "Ignoring a LocationBinding that does not decode; it binds nothing", "locationBinding", u.GetNamespace()+"/"+u.GetName())
		return obj, nil
	}
	b.ManagedFields = nil
	b.Status = controlv1alpha1.LocationBindingStatus{}
	return b, nil
}
