package view

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// This file states what views need of the rest of the server, in API terms, the way
// metrics-server's pkg/api/interfaces.go does: the objects (the cache, pkg/cache) and the source
// API server (pkg/source). The views hold no objects and no source clients of their own.

// Objects is what views read: the mirrored resources and, per resource, its Store.
// pkg/apiserver hands views the cache (*cache.Cache) through it.
type Objects interface {
	// Discovered reports whether the mirrored resources are known: the first read of the
	// source's discovery is done, and the cache has not stopped. Otherwise every request is
	// answered 503 (ServeView).
	Discovered() bool
	// Resources lists the currently mirrored resources.
	Resources() []source.ResourceInfo
	// Store returns the store of a mirrored resource; false when the resource is not mirrored.
	Store(gvr schema.GroupVersionResource) (Store, bool)
}

// Store is one mirrored resource as views read it: every location's objects, their list and
// watch at a resourceVersion, and the waits for freshness. *cache.ResourceStore implements it;
// the methods are documented there.
type Store interface {
	// List returns one page of a location's objects (kube-apiserver's list semantics).
	List(location string, opts cache.ListOptions) (cache.ListResult, error)
	// Watch streams a location's events from a resourceVersion or with initial events.
	Watch(ctx context.Context, location string, opts cache.WatchOptions) (watch.Interface, error)
	// Lookup returns a location's objects named namespace/name in every logical cluster.
	Lookup(location, namespace, name string) ([]*cache.Object, uint64)
	// GetInCluster returns a location's object namespace/name of one logical cluster.
	GetInCluster(location, cluster, namespace, name string) (obj *cache.Object, rv uint64, ok bool)
	// WithheldError explains an object the location's view withholds (it does not render).
	WithheldError(location, cluster, namespace, name string) error
	// Namespaces counts a location's objects per namespace (of a part of it, or all).
	Namespaces(location string, part contract.ViewPart) map[string]int
	// Assignment returns the bound locations a source object is assigned to, as views see it.
	Assignment(u *unstructured.Unstructured, cluster string) []string
	// SourceStore holds the source's objects as the cache stores them (READ-ONLY), keyed by
	// contract.Key: the copy a location's mark write starts from (marksStorage).
	SourceStore() toolscache.Store
	// LocationView renders a source object as location's view shows it.
	LocationView(u *unstructured.Unstructured, cluster string, locations []string, location string) *unstructured.Unstructured
	// ResourceVersion is the highest resourceVersion of the source the store has processed.
	ResourceVersion() uint64
	// WaitForResourceVersion blocks until ResourceVersion() reaches rv or ctx ends.
	WaitForResourceVersion(ctx context.Context, rv uint64) error
	// WaitRendered blocks until no rendering of the object namespace/name of cluster is
	// pending for location (its newest version shows), or ctx ends.
	WaitRendered(ctx context.Context, location, cluster, namespace, name string) error
	// WaitUntilSynced blocks until the first list of the resource is stored, for at most timeout.
	WaitUntilSynced(ctx context.Context, timeout time.Duration) error
	// HasSynced reports whether the first list of the resource is stored.
	HasSynced() bool
	// SyncError is the source's answer to the failing first list, if any.
	SyncError() error
}

// Source is what views need of the source API server besides the cache, with the server's own
// identity. *source.Source implements it.
type Source interface {
	// ResourceVersion returns the source's current resourceVersion for gvr: the consistent-read
	// probe (see freshness.waitConsistent).
	ResourceVersion(ctx context.Context, gvr schema.GroupVersionResource) (uint64, error)
	// Get reads one object of a logical cluster live from the source (not from the cache).
	Get(ctx context.Context, gvr schema.GroupVersionResource, cluster, namespace, name string) (*unstructured.Unstructured, error)
	// ClusterResource returns a client of gvr in namespace of one logical cluster of the source
	// (on a kcp source, under /clusters/<cluster>): status write-back goes through it.
	ClusterResource(gvr schema.GroupVersionResource, cluster, namespace string) (dynamic.ResourceInterface, error)
	// Resource returns a client of gvr on the source as configured (for a kcp source, the
	// wildcard endpoint) in namespace: tables read CustomResourceDefinitions through it.
	Resource(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface
}

var (
	_ Store  = (*cache.ResourceStore)(nil)
	_ Source = (*source.Source)(nil)
)
