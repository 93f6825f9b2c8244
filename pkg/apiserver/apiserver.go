package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	toolscache "k8s.io/client-go/tools/cache"

	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationevents"
	"github.com/cluster-mapper/cluster-mapper/pkg/registry/location"
	"github.com/cluster-mapper/cluster-mapper/pkg/registry/view"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// ExtraConfig is the mapper-apiserver's own configuration.
type ExtraConfig struct {
	// Source is the gateway to the source API server (its clients, with the server's own
	// identity): the cache lists and watches through it, and views read by name and write
	// status back through it.
	Source *source.Source
	// Cache is the indexed cache of the source that views serve from.
	Cache *cache.Cache
	// Rules follows the source's Customizations and SyncTargets and hands each snapshot to
	// Cache.SetRules; nil renders no Customizations (the cache must then not wait for rules).
	// mapper-apiserver writes nothing to the source but status written through views:
	// mapper-controller, under leader election, writes the status of Customizations (from the
	// render failures `locations` shows) and keeps status records in step.
	Rules *customization.Follower
	// RenderEvents records an Event on each object whose rendering was refused; nil records
	// none.
	RenderEvents *customization.EventWriter
	// View tunes the location views.
	View view.Options
	// Registrations follows the source's SyncTargets and location Leases for `locations`;
	// nil serves the index's locations only.
	Registrations *location.Registrations
	// LocationEvents records Events on source objects about their locations: a deletion that
	// waits for a location (the cache reports them, cache.StoreOptions.DeletionPending), and an
	// outcome record a location wrote with a new reason (view.Options.OutcomeRecorded); nil
	// records none.
	LocationEvents *locationevents.Recorder
}

// Config is the configuration of a mapper-apiserver: the generic server's and our own.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	ExtraConfig   ExtraConfig
}

type completedConfig struct {
	GenericConfig genericapiserver.CompletedConfig
	ExtraConfig   *ExtraConfig
	// coreClientConfig reaches the core API (--kubeconfig), for the readiness checks.
	coreClientConfig *restclient.Config
}

// CompletedConfig is a Config with its defaults filled in, ready for New.
type CompletedConfig struct {
	*completedConfig
}

// Server is a running mapper-apiserver.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

// Complete fills in the defaults of the generic configuration.
func (cfg *Config) Complete() CompletedConfig {
	return CompletedConfig{&completedConfig{
		GenericConfig:    cfg.GenericConfig.Complete(),
		ExtraConfig:      &cfg.ExtraConfig,
		coreClientConfig: cfg.GenericConfig.ClientConfig,
	}}
}

// New builds the server: the mapper.kcp.io/v1alpha1 group with `locations` and the
// `locations/proxy` subresource, a post-start hook that runs the cache, and a readyz check that
// turns true once every source informer has synced.
func (c completedConfig) New() (*Server, error) {
	if c.ExtraConfig.Cache == nil {
		return nil, fmt.Errorf("a source cache is required")
	}
	// Until the delegated authentication is ready, requests are answered 503, not as
	// system:anonymous (delegatedAuthentication). Outside every filter.
	authn := newDelegatedAuthentication(c.GenericConfig.SecureServing, c.coreClientConfig)
	if authn != nil {
		build := c.GenericConfig.BuildHandlerChainFunc
		c.GenericConfig.BuildHandlerChainFunc = func(apiHandler http.Handler, cfg *genericapiserver.Config) http.Handler {
			return authn.gate(build(apiHandler, cfg))
		}
	}
	genericServer, err := c.GenericConfig.New("mapper-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	s := &Server{GenericAPIServer: genericServer}

	locationsConfig := location.Config{Stats: c.ExtraConfig.Cache, Resources: location.CacheResourceHealth{Cache: c.ExtraConfig.Cache}, Failures: c.ExtraConfig.Cache}
	if c.ExtraConfig.Registrations != nil {
		locationsConfig.Registry = c.ExtraConfig.Registrations
	}
	locations := location.NewREST(locationsConfig)
	views := view.NewREST(view.New(viewObjects{c.ExtraConfig.Cache}, c.ExtraConfig.Source, c.ExtraConfig.View))
	apiGroupInfo := genericapiserver.NewDefaultAPIGroupInfo(mapper.GroupName, Scheme, ParameterCodec, Codecs)
	apiGroupInfo.VersionedResourcesStorageMap[v1alpha1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"locations":       locations,
		"locations/proxy": views,
	}
	if err := s.GenericAPIServer.InstallAPIGroup(&apiGroupInfo); err != nil {
		return nil, err
	}

	sourceCache, registrations, rules := c.ExtraConfig.Cache, c.ExtraConfig.Registrations, c.ExtraConfig.Rules
	deletionEvents, renderEvents := c.ExtraConfig.LocationEvents, c.ExtraConfig.RenderEvents
	s.GenericAPIServer.AddPostStartHookOrDie("start-source-cache", func(ctx genericapiserver.PostStartHookContext) error {
		if deletionEvents != nil {
			go deletionEvents.Run(ctx)
		}
		if rules != nil {
			go rules.Run(ctx)
		}
		if renderEvents != nil {
			go renderEvents.Run(ctx)
		}
		go sourceCache.Run(ctx)
		go func() {
			if toolscache.WaitForCacheSync(ctx.Done(), sourceCache.HasSynced) {
				releaseStartupMemory()
			}
		}()
		if registrations != nil {
			registrations.Run(ctx)
		}
		return nil
	})
	if err := s.GenericAPIServer.AddReadyzChecks(healthz.NamedCheck("source-cache-synced", func(*http.Request) error {
		if !sourceCache.HasSynced() {
			if waiting := rules.Waiting(); len(waiting) > 0 {
				// The cache lists nothing before the rules it renders with (WaitForRules).
				return fmt.Errorf("waiting to list %s of the source before the mirrored resources (docs/install.md: the CRDs of artifacts/crds)", strings.Join(waiting, ", "))
			}
			return fmt.Errorf("the source cache has not synced every mirrored resource yet")
		}
		return nil
	})); err != nil {
		return nil, err
	}
	if authn != nil {
		if err := s.GenericAPIServer.AddReadyzChecks(authn); err != nil {
			return nil, err
		}
		s.GenericAPIServer.AddPostStartHookOrDie("delegated-authentication-ready", func(ctx genericapiserver.PostStartHookContext) error {
			go authn.Run(ctx)
			return nil
		})
	}
	s.GenericAPIServer.AddPreShutdownHookOrDie("stop-locations", func() error {
		locations.Destroy()
		return nil
	})
	return s, nil
}

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	klog.FromContext(ctx).Info("starting mapper-apiserver")
	return s.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}
