// Package customizationstatus is mapper-controller's controller of the status of
// Customizations (docs/customization.md, "Status"). It runs customization.StatusWriter under
// mapper-controller's leader election, with what the StatusWriter reports gathered from:
//   - the Customizations and SyncTargets of the source, compiled by a customization.Follower as
//     mapper-apiserver compiles them (the Compiled condition, and the selectors);
//   - the source objects' metadata (pkg/controller/mirror): how many (object, location) pairs
//     each Customization selects (customization.Snapshot.SelectedObjects);
//   - mapper-apiserver's `locations` (status.customizationFailures): the renderings that fail.
//     Only the views' cache knows which renderings fail; it reports them read-only, per
//     location, and mapper-controller, the one writer, turns them into each Customization's
//     status.
package customizationstatus

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	mapperv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
)

// DefaultInterval is how often the statuses are brought up to date.
const DefaultInterval = 2 * time.Second

// locationsResource is mapper-apiserver's `locations`.
var locationsResource = mapperv1alpha1.SchemeGroupVersion.WithResource(contract.LocationsResource)

// Objects gives the source objects' metadata: *mirror.Mirror.
type Objects interface {
	// HasSynced reports whether every resource was listed once (or cannot be).
	HasSynced() bool
	// Candidates returns the objects of namespace in cluster, as SelectedObjects reads them.
	Candidates(cluster, namespace string) []customization.Candidate
}

// Config configures the controller.
type Config struct {
	// Source is the source's client (a kcp source's wildcard endpoint): the Follower's
	// informers of Customizations and SyncTargets.
	Source dynamic.Interface
	// PlainCluster is the logical cluster of a plain source, "" for a kcp source
	// (sourcecluster.Options.PlainCluster).
	PlainCluster string
	// Writers returns the client of one logical cluster of the source.
	Writers func(cluster string) (dynamic.Interface, error)
	// MapperAPI is a client of mapper-apiserver's API: `locations`.
	MapperAPI dynamic.Interface
	// Objects gives the source objects' metadata.
	Objects Objects
	// Limits are mapper-apiserver's limits per namespace (its --max-customizations-per-namespace
	// and --max-mutations-per-namespace): the Customizations past them are reported Degraded
	// (LimitExceeded). They must equal mapper-apiserver's flags for the status to say what the
	// views do.
	Limits customization.Limits
	// Interval is how often the statuses are brought up to date; DefaultInterval when 0.
	Interval time.Duration
}

// Run runs the Follower, the informers on `locations` (registered and unregistered) and the
// StatusWriter until ctx ends.
func Run(ctx context.Context, cfg Config) {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	follower := customization.NewFollower(cfg.Source, customization.FollowerOptions{Options: customization.Options{PlainCluster: cfg.PlainCluster, Limits: cfg.Limits}})
	// `locations` lists registered locations only unless asked (docs/locations.md, "kubectl
	// get locations"); a view renders for every location its objects are assigned to, and a
	// Customization fails wherever it renders (a mapper may read its view without a SyncTarget,
	// --register=false): one informer for each.
	registered := locationsInformer(cfg.MapperAPI, "")
	unregistered := locationsInformer(cfg.MapperAPI, mapperv1alpha1.RegisteredFieldLabel+"=false")
	writer := customization.NewStatusWriter(follower, customization.Observed{
		Selected: func(s *customization.Snapshot) (map[customization.RuleKey]int64, bool) {
			if !cfg.Objects.HasSynced() {
				return nil, false
			}
			return s.SelectedObjects(cfg.Objects.Candidates), true
		},
		Failures: func() (map[customization.RuleKey]customization.Failures, bool) {
			if !registered.HasSynced() || !unregistered.HasSynced() {
				return nil, false
			}
			return failuresOf(append(registered.GetStore().List(), unregistered.GetStore().List()...)), true
		},
	}, cfg.Writers, cfg.Interval)
	go follower.Run(ctx)
	go registered.RunWithContext(ctx)
	go unregistered.RunWithContext(ctx)
	writer.Run(ctx)
}

// locationsInformer returns an informer on mapper-apiserver's `locations` with fieldSelector
// ("" for none), keeping what trimLocation keeps.
func locationsInformer(client dynamic.Interface, fieldSelector string) toolscache.SharedIndexInformer {
	informer := dynamicinformer.NewFilteredDynamicInformer(client, locationsResource, "", 0, toolscache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = fieldSelector }).Informer()
	_ = informer.SetTransform(trimLocation)
	_ = informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *toolscache.Reflector, err error) {
		klog.FromContext(ctx).V(2).Info("Cannot list or watch mapper-apiserver's locations; Customizations' statuses wait", "fieldSelector", fieldSelector, "err", err.Error())
	})
	return informer
}

// trimLocation is the `locations` informer's transform: a *mapperv1alpha1.Location with its
// name, resourceVersion and status.customizationFailures only. An object that does not decode
// keeps only its name (it reports no failures).
func trimLocation(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &mapperv1alpha1.Location{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), ResourceVersion: u.GetResourceVersion()}}
	raw, found, _ := unstructured.NestedSlice(u.Object, "status", "customizationFailures")
	if !found {
		return out, nil
	}
	var failures []mapperv1alpha1.CustomizationFailures
	for _, item := range raw {
		m, ok := item.(map[string]interface{})
		if !ok {
			continue
		}
		var f mapperv1alpha1.CustomizationFailures
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &f); err == nil {
			failures = append(failures, f)
		}
	}
	out.Status.CustomizationFailures = failures
	return out, nil
}

// failuresOf gathers the failures every Location reports, per Customization: the counts summed
// over locations, and each location's first failures (which hold the first ones over all
// locations, see customization.Failures).
func failuresOf(locations []interface{}) map[customization.RuleKey]customization.Failures {
	out := map[customization.RuleKey]customization.Failures{}
	for _, obj := range locations {
		l, ok := obj.(*mapperv1alpha1.Location)
		if !ok {
			continue
		}
		for _, cf := range l.Status.CustomizationFailures {
			key := customization.RuleKey{Cluster: cf.Cluster, Namespace: cf.Namespace, Name: cf.Name}
			f := out[key]
			f.Count += cf.FailingObjects
			for _, rf := range cf.Failures {
				f.Some = append(f.Some, customization.Failure{Customization: key, Resource: rf.Resource, Namespace: rf.Namespace,
					Name: rf.Name, Location: l.Name, Reason: rf.Reason, Message: rf.Message})
			}
			out[key] = f
		}
	}
	return out
}
