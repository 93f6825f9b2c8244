package source

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/watchlist"
)

// Config configures a Source.
type Config struct {
	// Dynamic is the client of the source API server as configured: on a kcp source, its
	// wildcard endpoint (/clusters/*), which serves lists and watches only.
	Dynamic dynamic.Interface
	// Discovery is the discovery client of the source (from the same rest.Config).
	Discovery discovery.DiscoveryInterface
	// ClusterDynamic returns the client of one logical cluster of a kcp source, whose paths are
	// those of that cluster (/clusters/<cluster>/...): kcp serves reads by name and writes only
	// there, not on the wildcard endpoint that Dynamic reads (sourcecluster.ClusterClients.For). nil for a
	// plain source, whose one cluster is Dynamic's.
	ClusterDynamic func(cluster string) (dynamic.Interface, error)
	// Objects, when set, is the client List and Watch read through (NewObjectClient, from the
	// same rest.Config as Dynamic): objects arrive as *Object, bytes and metadata, not decoded.
	// nil lists and watches through Dynamic, whose objects are *unstructured.Unstructured (as
	// client-go's fake clients in unit tests).
	Objects rest.Interface
}

// Source is the gateway to the source API server, with the server's own identity: its
// discovery (Discover), the list and watch that feed the cache (List, Watch), the
// consistent-read probe (ResourceVersion), live reads by name (Get) and clients for writes
// (ClusterResource, Resource). It holds no objects: the cache (pkg/cache) does. Safe for
// concurrent use.
type Source struct {
	cfg Config

	rvMu       sync.Mutex
	rvBatchers map[schema.GroupVersionResource]*rvBatcher
}

// New validates cfg and returns a Source. Dynamic and Discovery are required.
func New(cfg Config) (*Source, error) {
	if cfg.Dynamic == nil {
		return nil, fmt.Errorf("source: Config.Dynamic is required")
	}
	if cfg.Discovery == nil {
		return nil, fmt.Errorf("source: Config.Discovery is required")
	}
	return &Source{cfg: cfg, rvBatchers: map[schema.GroupVersionResource]*rvBatcher{}}, nil
}

// List lists gvr in all namespaces (of every logical cluster, on a kcp source) with opts: the
// reflector's list of the cache. The result is a *List of *Object with Config.Objects, else an
// *unstructured.UnstructuredList. Errors are the source's API errors.
func (s *Source) List(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (runtime.Object, error) {
	if s.cfg.Objects == nil {
		return s.cfg.Dynamic.Resource(gvr).List(ctx, opts)
	}
	list := &List{}
	err := s.cfg.Objects.Get().AbsPath(resourcePath(gvr)...).
		SpecificallyVersionedParams(&opts, parameterCodec, versionV1).
		Do(ctx).Into(list)
	if err != nil {
		return nil, err
	}
	return list, nil
}

// Watch watches gvr in all namespaces with opts (also streaming lists, sendInitialEvents): the
// reflector's watch of the cache. Events carry *Object with Config.Objects, else
// *unstructured.Unstructured (and *metav1.Status for errors). Errors are the source's API
// errors.
func (s *Source) Watch(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (watch.Interface, error) {
	if s.cfg.Objects == nil {
		return s.cfg.Dynamic.Resource(gvr).Watch(ctx, opts)
	}
	opts.Watch = true
	return s.cfg.Objects.Get().AbsPath(resourcePath(gvr)...).
		SpecificallyVersionedParams(&opts, parameterCodec, versionV1).
		Watch(ctx)
}

// IsWatchListSemanticsUnSupported reports whether the source's client cannot do streaming lists
// (client-go's watchlist.DoesClientNotSupportWatchListSemantics of Dynamic: true for client-go's
// fake clients, false for real ones). client-go's reflector reads it through
// cache.ToListWatcherWithWatchListSemantics, as informer factories do.
func (s *Source) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(s.cfg.Dynamic)
}

// ResourceVersion returns the source's current resourceVersion for gvr, read with a `limit=1`
// LIST at resourceVersion "" (a consistent read on the source). The view waits until the store
// reached it (ResourceStore.WaitForResourceVersion) to serve consistent reads, like
// kube-apiserver's consistent reads from cache. Errors are the source's API errors, or an
// error naming the resourceVersion when the source answered one that is not a number.
//
// Concurrent callers for the same gvr share requests, but a caller only joins a request that
// starts after it arrived (at most one request in flight and one queued per gvr), so the RV is
// never older than the caller's own call: read-your-writes holds. (singleflight would let a
// caller join a request started before a write the caller has just made.)
func (s *Source) ResourceVersion(ctx context.Context, gvr schema.GroupVersionResource) (uint64, error) {
	s.rvMu.Lock()
	b := s.rvBatchers[gvr]
	if b == nil {
		b = &rvBatcher{fetch: func(ctx context.Context) (uint64, error) {
			list, err := s.cfg.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return 0, err
			}
			rv, err := strconv.ParseUint(list.GetResourceVersion(), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("the source answered resourceVersion %q for %s: %v", list.GetResourceVersion(), gvr.GroupResource(), err)
			}
			return rv, nil
		}}
		s.rvBatchers[gvr] = b
	}
	s.rvMu.Unlock()
	return b.get(ctx)
}

// Get reads namespace/name of gvr in the logical cluster cluster live from the source (a
// consistent GET, resourceVersion ""). namespace is "" for cluster-scoped resources. Errors are
// the source's API errors, or the error of building the cluster's client.
func (s *Source) Get(ctx context.Context, gvr schema.GroupVersionResource, cluster, namespace, name string) (*unstructured.Unstructured, error) {
	ri, err := s.ClusterResource(gvr, cluster, namespace)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, name, metav1.GetOptions{})
}

// ClusterResource returns a client of gvr in namespace ("" for cluster-scoped resources) of one
// logical cluster of the source: on a kcp source its requests go to the cluster's own paths
// (Config.ClusterDynamic, /clusters/<cluster>/...); on a plain source, the one cluster, to the
// source itself. Views write status back and read objects by name through it. The error is
// that of building the cluster's client (an invalid cluster name).
func (s *Source) ClusterResource(gvr schema.GroupVersionResource, cluster, namespace string) (dynamic.ResourceInterface, error) {
	d := s.cfg.Dynamic
	if s.cfg.ClusterDynamic != nil {
		var err error
		if d, err = s.cfg.ClusterDynamic(cluster); err != nil {
			return nil, err
		}
	}
	if namespace == "" {
		return d.Resource(gvr), nil
	}
	return d.Resource(gvr).Namespace(namespace), nil
}

// Resource returns a client of gvr on the source as configured (in namespace, "" for
// cluster-scoped resources or all namespaces). On a kcp source that is the wildcard endpoint,
// which serves lists and watches only: reads by name and writes use ClusterResource.
func (s *Source) Resource(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return s.cfg.Dynamic.Resource(gvr)
	}
	return s.cfg.Dynamic.Resource(gvr).Namespace(namespace)
}

// OpenAPIV3 returns the client of the source's OpenAPI v3 index and documents (/openapi/v3),
// which views serve for the resources they serve.
func (s *Source) OpenAPIV3() openapi.Client { return s.cfg.Discovery.OpenAPIV3() }

// OpenAPIV2 returns the source's OpenAPI v2 document (/openapi/v2) as JSON. Errors are the
// source's API errors.
func (s *Source) OpenAPIV2(ctx context.Context) ([]byte, error) {
	return s.cfg.Discovery.RESTClient().Get().AbsPath("/openapi/v2").SetHeader("Accept", "application/json").Do(ctx).Raw()
}
