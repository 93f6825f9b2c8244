package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// Defaults of Config (renew every 10 s, status at most once a minute unless it
// changes; the Lease duration is the default grace period of the location lifecycle
// controller, as node Leases last node-monitor-grace-period).
const (
	DefaultLeaseNamespace = contract.ControlNamespace
	DefaultRenewInterval  = 10 * time.Second
	DefaultLeaseDuration  = 40 * time.Second
	DefaultStatusInterval = time.Minute
)

// Config configures a heartbeat.
type Config struct {
	// Location names the Lease and the SyncTarget.
	Location string
	// Part is the mapper's part of the location (a shard; the zero ViewPart for the whole
	// location): its Lease is contract.ShardLeaseName(Location, Part), "<location>.<i>-of-<n>"
	// for a hash shard, so that each shard's liveness is seen on its own (the location
	// lifecycle controller reads every shard's Lease).
	Part contract.ViewPart
	// Identity is the mapper's leader election identity; it holds the Lease.
	Identity string
	// Version is the mapper's version; Mode is controlv1alpha1.ModePull or ModePush.
	Version, Mode string
	// Source is the client config of the source kube-apiserver (see SourceConfig).
	Source *rest.Config
	// LeaseNamespace defaults to DefaultLeaseNamespace.
	LeaseNamespace string
	// RenewInterval is how often the Lease is renewed and the status observed; default
	// DefaultRenewInterval.
	RenewInterval time.Duration
	// LeaseDuration is the Lease's spec.leaseDurationSeconds; default DefaultLeaseDuration.
	LeaseDuration time.Duration
	// StatusInterval is the longest time between two status writes (and between two
	// verifications for the counts); a changed status is written at once. Default
	// DefaultStatusInterval.
	StatusInterval time.Duration
	// Observe returns the mapper's current observation (see Observer.Observe).
	Observe func(ctx context.Context, verifyNow bool) Observation
	// Spec, when not nil, is called on every renewal with the spec of the location's
	// SyncTarget as read then, or nil when the location has no SyncTarget (or the CRD is not
	// installed) or its identity may not read it (403): the mapper takes spec.paused and
	// spec.haltedResources from it (mapper.Mapper.SetPause). It is not called when the read
	// fails otherwise (the source unreachable): what was read last stays in force.
	Spec func(ctx context.Context, spec *controlv1alpha1.SyncTargetSpec)
}

// Run renews the Lease and writes the SyncTarget status until ctx ends (the mapper stops
// leading). Failures (no SyncTarget, 403, an unreachable source) are logged and retried;
// they never stop the mapper. It returns an error only when cfg is incomplete.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Location == "" || cfg.Identity == "" || cfg.Source == nil || cfg.Observe == nil {
		return errors.New("heartbeat: location, identity, source and observe are required")
	}
	if cfg.LeaseNamespace == "" {
		cfg.LeaseNamespace = DefaultLeaseNamespace
	}
	if cfg.RenewInterval <= 0 {
		cfg.RenewInterval = DefaultRenewInterval
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = DefaultStatusInterval
	}
	src := rest.CopyConfig(cfg.Source)
	src.UserAgent = rest.DefaultKubernetesUserAgent() + " cluster-mapper/heartbeat"
	kube, err := kubernetes.NewForConfig(src)
	if err != nil {
		return fmt.Errorf("heartbeat: source client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(src)
	if err != nil {
		return fmt.Errorf("heartbeat: source client: %w", err)
	}
	logger := klog.FromContext(ctx).WithValues("syncTarget", cfg.Location)
	if !cfg.Part.Whole() {
		logger = logger.WithValues("shard", cfg.Part.String())
	}
	ctx = klog.NewContext(ctx, logger)
	leaseName := contract.ShardLeaseName(cfg.Location, cfg.Part)
	logger.Info("Registering the location: renewing its Lease and writing its SyncTarget status",
		"source", src.Host, "lease", cfg.LeaseNamespace+"/"+leaseName, "renewInterval", cfg.RenewInterval)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runLease(ctx, kube, cfg.LeaseNamespace, leaseName, cfg.Identity, cfg.RenewInterval, cfg.LeaseDuration)
	}()
	w := &statusWriter{cfg: cfg, client: synctarget.NewClient(dyn), leases: kube.CoordinationV1().Leases(cfg.LeaseNamespace)}
	ticker := time.NewTicker(cfg.RenewInterval)
	defer ticker.Stop()
	for {
		w.tick(ctx)
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-ticker.C:
		}
	}
}

// statusWriter keeps what it last wrote, to write only on change or when StatusInterval has
// passed.
type statusWriter struct {
	cfg          Config
	client       *synctarget.Client
	leases       coordinationv1client.LeaseInterface
	lastWrite    time.Time
	lastVerify   time.Time
	objects      *controlv1alpha1.ObjectCounts
	missingNoted bool
	// conflicted is set when the last status write failed with 409 Conflict: the next tick
	// reads the SyncTarget from etcd instead of the API server's cache, which may still hold
	// the version that conflicted.
	conflicted bool
}

// tick reads the SyncTarget and, when the location is registered, observes the mapper and
// writes the status when it changed or is due. It reads from the API server's watch cache (one
// read per location every RenewInterval, 100/s for 1,000 locations, should not each be a
// quorum read of etcd), and from etcd after a conflict.
func (w *statusWriter) tick(ctx context.Context) {
	logger := klog.FromContext(ctx)
	get := w.client.GetCachedStatus
	if w.conflicted {
		get = w.client.GetStatus
	}
	st, err := get(ctx, w.cfg.Location)
	if w.cfg.Spec != nil {
		switch {
		case err == nil:
			w.cfg.Spec(ctx, &st.Spec)
		case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
			w.cfg.Spec(ctx, nil)
		}
	}
	if apierrors.IsNotFound(err) {
		if !w.missingNoted {
			logger.Info("The location has no SyncTarget in the source (not registered, or the CRD is not installed); its status is not written", "err", err)
			w.missingNoted = true
		}
		return
	}
	if err != nil {
		logger.Info("Cannot read the SyncTarget; retrying", "err", err)
		return
	}
	w.missingNoted = false
	// Observe only a registered location: the verification reads the whole view and target.
	now := time.Now()
	verifyNow := w.objects == nil || now.Sub(w.lastVerify) >= w.cfg.StatusInterval
	obs := w.cfg.Observe(ctx, verifyNow)
	if obs.Objects != nil {
		w.objects, w.lastVerify = obs.Objects, now
	}
	status := desiredStatus(st.Status, obs, w.objects, w.cfg, w.siblingsLive(ctx))
	due := now.Sub(w.lastWrite) >= w.cfg.StatusInterval
	if !due && equalIgnoringTimes(st.Status, status) {
		return
	}
	st.Status = status
	_, err = w.client.UpdateStatus(ctx, st)
	w.conflicted = apierrors.IsConflict(err)
	if err != nil {
		logger.Info("Cannot write the SyncTarget status; retrying", "err", err)
		return
	}
	w.lastWrite = now
	logger.V(2).Info("Wrote the SyncTarget status", "ready", obs.Ready, "reason", obs.Reason)
}

// desiredStatus is old with the observation applied: the Ready and ResourcesCompatible
// conditions (their lastTransitionTime kept while their status stays), mapper identity,
// version and mode, objects (the latest counts), resources and capacity.
//
// A shard's mapper (cfg.Part not the whole location) writes its own entry of status.shards
// instead, and sets Ready and objects to the sum over the shards of its count
// (synctarget.SetShard): live reports whether another shard's mapper renews its Lease.
func desiredStatus(old controlv1alpha1.SyncTargetStatus, obs Observation, objects *controlv1alpha1.ObjectCounts, cfg Config, live func(contract.ViewPart) bool) controlv1alpha1.SyncTargetStatus {
	s := *old.DeepCopy()
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: controlv1alpha1.SyncTargetReady, Status: obs.Ready, Reason: obs.Reason, Message: obs.Message})
	meta.SetStatusCondition(&s.Conditions, ResourcesCompatible(obs.Resources, obs.MappingProblems))
	if cfg.Part.Whole() || s.Mapper == nil {
		// Shards keep the first writer's: rewriting it in turn would make every shard write
		// the status on every tick. Each shard's own identity is in its status.shards entry.
		s.Mapper = &controlv1alpha1.MapperStatus{Identity: cfg.Identity, Version: cfg.Version, Mode: cfg.Mode}
	}
	if objects != nil {
		s.Objects = objects.DeepCopy()
	}
	s.Resources = obs.Resources
	if obs.Capacity != nil {
		s.Capacity = obs.Capacity
	}
	if !cfg.Part.Whole() {
		entry := controlv1alpha1.ShardStatus{Identity: cfg.Identity, Ready: obs.Ready, Reason: obs.Reason}
		if objects != nil {
			entry.Objects = objects.DeepCopy()
		}
		synctarget.SetShard(&s, cfg.Part, entry, live)
	}
	return s
}

// ResourcesCompatible is the SyncTarget's ResourcesCompatible condition for the view's
// resources as status.resources reports them (docs/locations.md, "Resource compatibility"):
//   - False when the target does not serve a resource (reason ResourcesHalted) or its schema of
//     one may refuse what the source's allows (reason SchemaIncompatible); the message names
//     each such resource with its reason, and the schema findings (at most 10 resources);
//   - Unknown (reason SchemaCompatibilityUnknown) when neither, and the comparison of some
//     resource's schemas could not tell;
//   - False with reason ResourceMappingsNotAccepted, before all of these, when mappingProblems
//     name ResourceMappings of the view that are not in force (mapper.Mapper.MappingProblems;
//     at most 10 in the message, then the resources above): the resources they name are not
//     mapped (docs/resourcemapping.md, "Validation and bad mappings");
//   - True (AllResourcesServed) otherwise.
func ResourcesCompatible(resources []controlv1alpha1.ResourceState, mappingProblems []string) metav1.Condition {
	c := metav1.Condition{Type: controlv1alpha1.SyncTargetResourcesCompatible, Status: metav1.ConditionTrue,
		Reason: controlv1alpha1.ReasonAllResourcesServed, Message: "The target serves every resource of the view compatibly."}
	var bad, unknown []string
	halted := false
	for _, r := range resources {
		switch {
		case r.State == controlv1alpha1.ResourceHalted:
			halted = true
			bad = append(bad, r.Resource+" ("+r.Reason+")")
		case r.Reason == controlv1alpha1.ReasonSchemaIncompatible:
			bad = append(bad, r.Resource+" ("+r.Reason+": "+r.Message+")")
		case r.Reason == controlv1alpha1.ReasonSchemaUnknown:
			unknown = append(unknown, r.Resource+" ("+r.Message+")")
		}
	}
	switch {
	case len(mappingProblems) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonMappingsNotAccepted
		c.Message = fmt.Sprintf("%d ResourceMappings of the view are not in force, and the resources they name are not mapped: %s.", len(mappingProblems), contract.JoinFirst(mappingProblems, 10))
		if len(bad) > 0 {
			c.Message += fmt.Sprintf(" The target does not serve %d resources of the view compatibly: %s.", len(bad), contract.JoinFirst(bad, 10))
		}
		c.Message = contract.Truncate(c.Message, 8192)
	case len(bad) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonSchemaIncompatible
		if halted {
			c.Reason = controlv1alpha1.ReasonResourcesHalted
		}
		c.Message = fmt.Sprintf("The target does not serve %d resources of the view compatibly: %s. Placements assign none of their new objects here.", len(bad), contract.JoinFirst(bad, 10))
	case len(unknown) > 0:
		c.Status, c.Reason = metav1.ConditionUnknown, controlv1alpha1.ReasonSchemaUnknown
		c.Message = fmt.Sprintf("Whether the target's schemas accept what the source's allow cannot be told for %d resources: %s.", len(unknown), contract.JoinFirst(unknown, 10))
	}
	return c
}

// siblingsLive reads the Leases of the other shards of the mapper's count (one cached GET
// each, resourceVersion "0") and returns whether each one's mapper is alive: its Lease was
// renewed within its spec.leaseDurationSeconds. nil for a mapper of the whole location.
func (w *statusWriter) siblingsLive(ctx context.Context) func(contract.ViewPart) bool {
	if w.cfg.Part.Whole() {
		return nil
	}
	live := map[string]bool{}
	now := time.Now()
	for _, p := range w.cfg.Part.Siblings() {
		if p.Equal(w.cfg.Part) {
			continue
		}
		l, err := w.leases.Get(ctx, contract.ShardLeaseName(w.cfg.Location, p), metav1.GetOptions{ResourceVersion: "0"})
		if err != nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
			continue // missing or unreadable: not known to be alive
		}
		live[p.String()] = now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
	}
	return func(p contract.ViewPart) bool { return live[p.String()] }
}

// equalIgnoringTimes compares two statuses without the conditions' lastTransitionTime and
// the counts' verifiedTime, so that only a real change triggers a write.
func equalIgnoringTimes(a, b controlv1alpha1.SyncTargetStatus) bool {
	strip := func(s controlv1alpha1.SyncTargetStatus) controlv1alpha1.SyncTargetStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		if s.Objects != nil {
			s.Objects.VerifiedTime = nil
		}
		for i := range s.Shards {
			if s.Shards[i].Objects != nil {
				s.Shards[i].Objects.VerifiedTime = nil
			}
		}
		return s
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}
