package app

import (
	"context"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-mapper/cluster-mapper/pkg/clusterinformer"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/binding"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/customizationstatus"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/informers"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/mirror"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/statusrecords"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
	"github.com/cluster-mapper/cluster-mapper/pkg/sourcecluster"
)

// discoveryLocation is the location whose view's discovery gives the resources mapper-apiserver
// mirrors. Every view serves the same discovery (docs/views.md, "Discovery"), for any valid
// location name, with or without objects.
const discoveryLocation = "mapper-controller"

// viewControllers are the controllers that read what mapper-apiserver serves (its views'
// discovery and generations, its `locations`) besides the source: the status records and the
// status of Customizations. They share the metadata of the source's objects (mirror).
type viewControllers struct {
	objects       *mirror.Mirror
	records       *statusrecords.Controller
	customization customizationstatus.Config
	// bindings are the LocationBindings in the Bound mode (nil: Open), set by run before the
	// status record controller starts.
	bindings *binding.Tracker
}

// newViewControllers builds them over the source's config source (with the controllers'
// client limits) and its discovery: objects' metadata through the metadata client, writes
// through each logical cluster's client (Options.Clusters), mapper-apiserver through
// --mapper-apiserver-kubeconfig.
func newViewControllers(o *Options, source *rest.Config, dyn dynamic.Interface, meta metadata.Interface, sourceDiscovery discovery.DiscoveryInterface) (*viewControllers, error) {
	api, err := o.mapperAPIConfig(source)
	if err != nil {
		return nil, err
	}
	views, err := sourcecluster.NewPathClients(api)
	if err != nil {
		return nil, err
	}
	viewDiscoveryConfig := rest.CopyConfig(api)
	viewDiscoveryConfig.Host = strings.TrimSuffix(api.Host, "/") + contract.ViewPath(discoveryLocation, "")
	viewDiscovery, err := discovery.NewDiscoveryClientForConfig(viewDiscoveryConfig)
	if err != nil {
		return nil, err
	}
	mapperAPI, err := dynamic.NewForConfig(api)
	if err != nil {
		return nil, err
	}
	writers, err := o.Clusters.Writers(rest.AddUserAgent(rest.CopyConfig(source), "status-writers"))
	if err != nil {
		return nil, err
	}
	c := &viewControllers{}
	c.objects = mirror.New(mirror.Config{
		Metadata: meta, Discovery: viewDiscovery, Interval: o.ViewDiscoveryInterval,
		Clusters: clusterinformer.Clusters{Default: o.Clusters.PlainCluster(), IgnoreAnnotation: !o.Clusters.KCP()},
		OnChange: func(gvr schema.GroupVersionResource, key contract.Key, obj *metav1.PartialObjectMetadata) {
			if records := c.records; records != nil {
				records.Enqueue(gvr, key, obj)
			}
		},
	})
	c.records = statusrecords.New(statusrecords.Config{
		Objects: c.objects, Writers: writers, Workers: o.Workers,
		Views: func(location, cluster string) (dynamic.Interface, error) {
			if err := contract.ValidateLocationName(location); err != nil {
				return nil, err
			}
			if err := contract.ValidateClusterName(cluster); err != nil {
				return nil, err
			}
			return views.For(contract.ViewPath(location, contract.ClusterName(cluster)))
		},
		HasStatus: statusSubresources(sourceDiscovery),
		Bound:     boundLocations(o.Clusters.KCP(), func() *locationbinding.Index { return c.bindings.Index() }),
	})
	c.customization = customizationstatus.Config{
		Source: dyn, PlainCluster: o.Clusters.PlainCluster(), Writers: writers, MapperAPI: mapperAPI, Objects: c.objects,
		Limits: customization.Limits{CustomizationsPerNamespace: o.MaxCustomizationsPerNamespace, MutationsPerNamespace: o.MaxMutationsPerNamespace},
	}
	return c, nil
}

// boundLocations returns the status record controller's Bound filter over the bindings index
// returns (a nil Index: every location bound). The controller names a plain source's one
// logical cluster (sourcecluster.Options.PlainCluster), whereas the binding Tracker keys
// bindings by their kcp.io/cluster annotation, which a plain source's objects do not carry: on
// a plain source the Tracker's cluster is "".
func boundLocations(kcp bool, index func() *locationbinding.Index) func(cluster, namespace string, locations []string) []string {
	return func(cluster, namespace string, locations []string) []string {
		if !kcp {
			cluster = ""
		}
		return index().Scope(cluster, namespace).Keep(locations)
	}
}

// viewControllersName names the status record and Customization status controllers together
// in run's table: they share the mirror.
const viewControllersName = "views"

// run runs the status record controller when records is set, the Customization status
// controller when customization is set, and the mirror for either, until ctx ends. bindings
// are the LocationBindings of the Bound mode (nil: Open), from the informers of shared.
func (c *viewControllers) run(ctx context.Context, records, customization bool, bindings *binding.Tracker, shared *informers.Set) {
	if !records && !customization {
		return
	}
	var wg sync.WaitGroup
	start := func(run func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); run(ctx) }()
	}
	if !records {
		c.records = nil // before the mirror starts: its events go nowhere
	}
	start(c.objects.Run)
	if records {
		c.bindings = bindings
		start(func(ctx context.Context) {
			if bindings != nil {
				shared.Start(ctx)
				// Precondition of removing a record: the LocationBindings are listed. Before,
				// every location would look unbound and every record would be removed.
				if !toolscache.WaitForCacheSync(ctx.Done(), bindings.HasSynced) {
					return
				}
			}
			c.records.Run(ctx)
		})
	}
	if customization {
		start(func(ctx context.Context) { customizationstatus.Run(ctx, c.customization) })
	}
	wg.Wait()
}

// mapperAPIConfig returns the client config of mapper-apiserver's API: from
// --mapper-apiserver-kubeconfig, else source's with the trailing /clusters/* of a kcp wildcard
// endpoint removed (the server's root, where an aggregator serves mapper.kcp.io).
func (o *Options) mapperAPIConfig(source *rest.Config) (*rest.Config, error) {
	if o.MapperAPIKubeconfig == "" {
		return sourcecluster.WithoutWildcard(source)
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.MapperAPIKubeconfig}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading --mapper-apiserver-kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = source.QPS, source.Burst
	return rest.AddUserAgent(cfg, "mapper-controller"), nil
}

// statusSubresources returns whether a resource has a status subresource on the source, from
// its discovery (read once per group version and kept: d should be a cached discovery client).
func statusSubresources(d discovery.DiscoveryInterface) func(gvr schema.GroupVersionResource) (bool, error) {
	return func(gvr schema.GroupVersionResource) (bool, error) {
		list, err := d.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
		if err != nil {
			return false, fmt.Errorf("reading the source's discovery of %s: %w", gvr.GroupVersion(), err)
		}
		for _, r := range list.APIResources {
			if r.Name == gvr.Resource+"/status" {
				return true, nil
			}
		}
		return false, nil
	}
}
