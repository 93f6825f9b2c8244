// Package statuscollector is the controller of mapper-controller that keeps one StatusSummary
// per StatusCollector (issue 14 item 5): every interval it collects the rows (each (object,
// location) pair whose location wrote a status back), evaluates the collector
// (pkg/statuscollector) and writes the summary and the collector's Ready condition when they
// changed.
package statuscollector

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/binding"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/informers"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
	"github.com/cluster-mapper/cluster-mapper/pkg/statuscollector"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// Resources of the controller.
var (
	// CollectorsResource is the GroupVersionResource of StatusCollectors.
	CollectorsResource = controlv1alpha1.SchemeGroupVersion.WithResource("statuscollectors")
	// SummariesResource is the GroupVersionResource of StatusSummaries.
	SummariesResource = controlv1alpha1.SchemeGroupVersion.WithResource("statussummaries")
)

// fieldManager names the controller's writes.
const fieldManager = "mapper-controller-status-collector"

// Config configures a Controller.
type Config struct {
	// Dynamic is the source's client.
	Dynamic dynamic.Interface
	// Informers are the process's shared informers over the source.
	Informers *informers.Set
	// Interval is how often every summary is recomputed; default 2s.
	Interval time.Duration
	// Bindings are the LocationBindings (the Bound mode): a collector sees the rows of the
	// locations bound to its namespace only (docs/tenancy.md). nil: the Open mode.
	Bindings *binding.Tracker
}

// Controller keeps the StatusSummaries of the source's StatusCollectors.
type Controller struct {
	dyn       dynamic.Interface
	interval  time.Duration
	informers *informers.Set
	bindings  *binding.Tracker

	collectors, targets toolscache.SharedIndexInformer

	mu sync.Mutex
	// written are the last results written per collector UID, to write only on change.
	written map[string]controlv1alpha1.StatusSummaryResults
	// programs are the compiled collectors per UID and generation.
	programs map[string]compiled
}

type compiled struct {
	generation int64
	program    *statuscollector.Program
	errs       []error
}

// New returns a Controller; Run starts it.
func New(cfg Config) *Controller {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	return &Controller{
		dyn: cfg.Dynamic, interval: cfg.Interval, informers: cfg.Informers, bindings: cfg.Bindings,
		collectors: cfg.Informers.Informer(CollectorsResource),
		targets:    cfg.Informers.Informer(synctarget.Resource),
		written:    map[string]controlv1alpha1.StatusSummaryResults{},
		programs:   map[string]compiled{},
	}
}

// Run runs the informers and recomputes every summary every interval until ctx ends. Without
// the StatusCollector CRD it waits (the informer retries).
func (c *Controller) Run(ctx context.Context) {
	c.informers.Start(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), c.collectors.HasSynced, c.targets.HasSynced, c.bindings.HasSynced) {
		return
	}
	wait.UntilWithContext(ctx, c.syncAll, c.interval)
}

// syncAll recomputes every collector's summary.
func (c *Controller) syncAll(ctx context.Context) {
	locs := map[string]*unstructured.Unstructured{}
	for _, obj := range c.targets.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			locs[u.GetName()] = u
		}
	}
	for _, obj := range c.collectors.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var sc controlv1alpha1.StatusCollector
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sc); err != nil {
			continue
		}
		if err := c.sync(ctx, &sc, u.GetAnnotations()[contract.ClusterAnnotation], locs); err != nil && !apierrors.IsConflict(err) {
			klog.FromContext(ctx).Info("Summarizing a StatusCollector failed; retrying", "collector", sc.Namespace+"/"+sc.Name, "err", err)
		}
	}
}

// sync recomputes one collector's summary and writes it and the collector's status when they
// changed. A resource whose informer has not synced yet makes it wait for the next round (no
// partial summary is written).
func (c *Controller) sync(ctx context.Context, sc *controlv1alpha1.StatusCollector, cluster string, locs map[string]*unstructured.Unstructured) error {
	uid := string(sc.UID)
	c.mu.Lock()
	p, ok := c.programs[uid]
	if !ok || p.generation != sc.Generation {
		prog, errs := statuscollector.Compile(&sc.Spec)
		p = compiled{generation: sc.Generation, program: prog, errs: errs}
		c.programs[uid] = p
	}
	c.mu.Unlock()
	if len(p.errs) > 0 {
		msgs := make([]string, 0, len(p.errs))
		for _, e := range p.errs {
			msgs = append(msgs, e.Error())
		}
		return c.writeStatus(ctx, sc, metav1.ConditionFalse, "CompilationFailed", contract.Truncate(strings.Join(msgs, "; "), 1024))
	}
	gvrs, err := controlv1alpha1.ExactResources(sc.Spec.Resources)
	if err != nil {
		return c.writeStatus(ctx, sc, metav1.ConditionFalse, "InvalidResources", err.Error())
	}
	selector := labels.Everything()
	if sc.Spec.ObjectSelector != nil {
		if selector, err = metav1.LabelSelectorAsSelector(sc.Spec.ObjectSelector); err != nil {
			return c.writeStatus(ctx, sc, metav1.ConditionFalse, "InvalidSelector", err.Error())
		}
	}
	var rows []statuscollector.Row
	bound := c.bindings.Index().Scope(cluster, sc.Namespace)
	for _, gvr := range gvrs {
		inf := c.informers.Informer(gvr)
		if !inf.HasSynced() {
			return nil
		}
		objs, _ := inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, sc.Namespace)
		for _, obj := range objs {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok || !selector.Matches(labels.Set(u.GetLabels())) || u.GetAnnotations()[contract.ClusterAnnotation] != cluster {
				continue
			}
			rows = append(rows, rowsOf(u, locs, bound)...)
		}
	}
	slices.SortFunc(rows, func(a, b statuscollector.Row) int {
		if c := strings.Compare(a.Object, b.Object); c != 0 {
			return c
		}
		return strings.Compare(a.Location, b.Location)
	})
	res := p.program.Summarize(rows)
	res.CollectorGeneration = sc.Generation
	if err := c.writeSummary(ctx, sc, res); err != nil {
		return err
	}
	if len(res.Errors) > 0 {
		return c.writeStatus(ctx, sc, metav1.ConditionFalse, controlv1alpha1.ReasonEvaluationFailed,
			fmt.Sprintf("expressions failed on some rows; the StatusSummary %s lists the first", sc.Name))
	}
	return c.writeStatus(ctx, sc, metav1.ConditionTrue, controlv1alpha1.ReasonSummarized, fmt.Sprintf("%d rows summarized", res.Rows))
}

// rowsOf returns the rows of one source object: each assigned location bound to the
// object's namespace (bound) with a status (its status.kcp.io/<location> record, or the
// object's .status when that is its only bound location). A location not bound to the
// namespace never shows the object, so a status record of it can only have been written by
// hand: it is no row, and nothing of that location (its labels) reaches the collector's CEL.
func rowsOf(u *unstructured.Unstructured, locs map[string]*unstructured.Unstructured, bound locationbinding.Scope) []statuscollector.Row {
	assigned, err := contract.ParseLocations(u.GetAnnotations()[contract.AssignedLocationsAnnotation])
	if err != nil {
		return nil
	}
	// The object is assigned to its bound locations only, as the views see it.
	assigned = slices.DeleteFunc(assigned, func(loc string) bool { return !bound.Binds(loc) })
	var out []statuscollector.Row
	for _, loc := range assigned {
		status, recorded, err := cache.StatusRecord(u, loc)
		if err != nil {
			continue
		}
		if !recorded && len(assigned) == 1 {
			status, _ = u.Object["status"].(map[string]interface{})
		}
		if status == nil {
			continue
		}
		row := statuscollector.Row{Object: u.GetNamespace() + "/" + u.GetName(), Location: loc, Obj: u.Object, Status: status}
		if st := locs[loc]; st != nil {
			row.LocationLabels = st.GetLabels()
		}
		out = append(out, row)
	}
	return out
}

// writeSummary creates or updates the StatusSummary of sc (owned by sc) when res changed.
func (c *Controller) writeSummary(ctx context.Context, sc *controlv1alpha1.StatusCollector, res controlv1alpha1.StatusSummaryResults) error {
	uid := string(sc.UID)
	c.mu.Lock()
	last, ok := c.written[uid]
	c.mu.Unlock()
	if ok && apiequality.Semantic.DeepEqual(last, res) {
		return nil
	}
	client := c.dyn.Resource(SummariesResource).Namespace(sc.Namespace)
	summary := &controlv1alpha1.StatusSummary{
		TypeMeta: metav1.TypeMeta{APIVersion: controlv1alpha1.SchemeGroupVersion.String(), Kind: "StatusSummary"},
		ObjectMeta: metav1.ObjectMeta{Name: sc.Name, Namespace: sc.Namespace, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: controlv1alpha1.SchemeGroupVersion.String(), Kind: "StatusCollector", Name: sc.Name, UID: sc.UID,
			Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}},
		Results: res,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(summary)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	cur, err := client.Get(ctx, sc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = client.Create(ctx, u, metav1.CreateOptions{FieldManager: fieldManager})
	case err == nil:
		u.SetResourceVersion(cur.GetResourceVersion())
		_, err = client.Update(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.written[uid] = res
	c.mu.Unlock()
	return nil
}

// writeStatus sets sc's Ready condition and observedGeneration when they changed.
func (c *Controller) writeStatus(ctx context.Context, sc *controlv1alpha1.StatusCollector, status metav1.ConditionStatus, reason, message string) error {
	next := sc.Status.DeepCopy()
	next.ObservedGeneration = sc.Generation
	meta.SetStatusCondition(&next.Conditions, metav1.Condition{Type: controlv1alpha1.StatusCollectorReady, Status: status,
		Reason: reason, Message: message, ObservedGeneration: sc.Generation})
	if apiequality.Semantic.DeepEqual(&sc.Status, next) {
		return nil
	}
	updated := sc.DeepCopy()
	updated.Status = *next
	updated.SetGroupVersionKind(controlv1alpha1.SchemeGroupVersion.WithKind("StatusCollector"))
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(updated)
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(CollectorsResource).Namespace(sc.Namespace).UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{FieldManager: fieldManager})
	return err
}

func ptr[T any](v T) *T { return &v }
