// Package statuscollector is the controller of mapper-controller that keeps one StatusSummary
// per StatusCollector (docs/status.md): every interval it collects the rows of each collector
// (each (object, location) pair whose location wrote a status back), evaluates the collector
// (pkg/statuscollector) and writes the summary and the collector's conditions when they
// changed.
//
// The collectors are computed per namespace, fairly (docs/status.md, "Fairness and budgets"):
// workers take them from a fair queue (pkg/fairqueue) that serves the namespaces in turn, with
// one collector of a namespace in flight at most, so that one tenant's expensive collector
// delays its own namespace's summaries only. Each summary's CEL cost is bounded
// (Config.CostPerSummary), each namespace's cost per second too (Config.CostPerSecond), and a
// namespace's collectors beyond Config.MaxPerNamespace are not computed; each of these is
// reported by the collector's Degraded condition.
package statuscollector

import (
	"context"
	"errors"
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
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/binding"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/informers"
	"github.com/cluster-mapper/cluster-mapper/pkg/fairqueue"
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

// Defaults of Config.
const (
	// DefaultWorkers is how many summaries are computed at once; a namespace has one at most.
	DefaultWorkers = 4
	// DefaultCostPerSummary bounds the CEL cost of one summary: the runtime budget
	// kube-apiserver gives one admission policy evaluation (celconfig.RuntimeCELCostBudget).
	DefaultCostPerSummary = 10_000_000
	// DefaultCostPerSecond is a namespace's CEL cost per second on average (its burst is
	// DefaultCostPerSummary), as for the renderings of Customizations
	// (cache.DefaultRenderCostPerSecond).
	DefaultCostPerSecond = 200_000
	// DefaultMaxPerNamespace is how many StatusCollectors of a namespace are computed, the
	// oldest first.
	DefaultMaxPerNamespace = 64
)

// Config configures a Controller. Zero values select the defaults.
type Config struct {
	// Dynamic is the source's client.
	Dynamic dynamic.Interface
	// Informers are the process's shared informers over the source.
	Informers *informers.Set
	// Interval is how often every summary is recomputed; default 2s.
	Interval time.Duration
	// Workers is how many summaries are computed at once (DefaultWorkers).
	Workers int
	// CostPerSummary bounds the CEL cost of one summary (DefaultCostPerSummary): past it, the
	// summary is left as it was and the collector is Degraded (BudgetExceeded).
	CostPerSummary int64
	// CostPerSecond is each namespace's CEL cost per second (DefaultCostPerSecond): a
	// namespace that spent more waits, and its collectors say Degraded (Throttled).
	CostPerSecond int64
	// MaxPerNamespace is how many collectors of a namespace are computed, the oldest first
	// (DefaultMaxPerNamespace); the others are Degraded (LimitExceeded).
	MaxPerNamespace int
	// Bindings are the LocationBindings (the Bound mode): a collector sees the rows of the
	// locations bound to its namespace only (docs/tenancy.md). nil: the Open mode.
	Bindings *binding.Tracker
}

// Controller keeps the StatusSummaries of the source's StatusCollectors.
type Controller struct {
	dyn       dynamic.Interface
	cfg       Config
	informers *informers.Set
	bindings  *binding.Tracker
	queue     *fairqueue.Queue[collectorKey]

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

// collectorKey names a StatusCollector in the queue: its logical cluster (kcp.io/cluster,
// empty on a plain source), namespace and name.
type collectorKey struct {
	cluster, namespace, name string
}

// tenant is the fair queue's tenant of a collector: its namespace in its logical cluster.
func (k collectorKey) tenant() string { return k.cluster + "|" + k.namespace }

// New returns a Controller; Run starts it.
func New(cfg Config) *Controller {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.CostPerSummary <= 0 {
		cfg.CostPerSummary = DefaultCostPerSummary
	}
	if cfg.CostPerSecond <= 0 {
		cfg.CostPerSecond = DefaultCostPerSecond
	}
	if cfg.MaxPerNamespace <= 0 {
		cfg.MaxPerNamespace = DefaultMaxPerNamespace
	}
	return &Controller{
		dyn: cfg.Dynamic, cfg: cfg, informers: cfg.Informers, bindings: cfg.Bindings,
		queue:      fairqueue.New[collectorKey](fairqueue.Options{CostPerSecond: cfg.CostPerSecond, Burst: cfg.CostPerSummary}),
		collectors: cfg.Informers.Informer(CollectorsResource),
		targets:    cfg.Informers.Informer(synctarget.Resource),
		written:    map[string]controlv1alpha1.StatusSummaryResults{},
		programs:   map[string]compiled{},
	}
}

// Run runs the informers and the workers, and queues every collector every interval, until
// ctx ends. Without the StatusCollector CRD it waits (the informer retries).
func (c *Controller) Run(ctx context.Context) {
	c.informers.Start(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), c.collectors.HasSynced, c.targets.HasSynced, c.bindings.HasSynced) {
		return
	}
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx) {
			}
		}()
	}
	wait.UntilWithContext(ctx, c.queueAll, c.cfg.Interval)
	c.queue.ShutDown()
	wg.Wait()
}

// queueAll queues every collector. A collector queued already is not queued twice, and one
// being computed is computed again afterwards (fairqueue.Queue.Add).
func (c *Controller) queueAll(context.Context) {
	for _, obj := range c.collectors.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		k := collectorKey{cluster: u.GetAnnotations()[contract.ClusterAnnotation], namespace: u.GetNamespace(), name: u.GetName()}
		c.queue.Add(k.tenant(), k)
	}
}

// processNext computes one queued collector's summary; false when ctx ended.
func (c *Controller) processNext(ctx context.Context) bool {
	tenant, k, ok := c.queue.Get(ctx)
	if !ok {
		return false
	}
	if err := c.syncKey(ctx, k); err != nil && !apierrors.IsConflict(err) {
		klog.FromContext(ctx).Info("Summarizing a StatusCollector failed; retrying", "collector", k.namespace+"/"+k.name, "err", err)
	}
	c.queue.Done(tenant, k, 0) // sync charged the summary's cost (Charge)
	return true
}

// syncKey computes the collector k, if it still exists.
func (c *Controller) syncKey(ctx context.Context, k collectorKey) error {
	objs, err := c.collectors.GetIndexer().ByIndex(toolscache.NamespaceIndex, k.namespace)
	if err != nil {
		return err
	}
	var self *unstructured.Unstructured
	var siblings []*unstructured.Unstructured
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GetAnnotations()[contract.ClusterAnnotation] != k.cluster {
			continue
		}
		siblings = append(siblings, u)
		if u.GetName() == k.name {
			self = u
		}
	}
	if self == nil {
		return nil
	}
	var sc controlv1alpha1.StatusCollector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(self.Object, &sc); err != nil {
		return nil
	}
	if older := olderThan(self, siblings); older >= c.cfg.MaxPerNamespace {
		msg := fmt.Sprintf("the namespace has %d older StatusCollectors, the most computed per namespace (--max-status-collectors-per-namespace); its StatusSummary is left as it is", older)
		return c.writeStatus(ctx, &sc, condition(metav1.ConditionFalse, controlv1alpha1.ReasonLimitExceeded, msg),
			condition(metav1.ConditionTrue, controlv1alpha1.ReasonLimitExceeded, msg))
	}
	locs := map[string]*unstructured.Unstructured{}
	for _, obj := range c.targets.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			locs[u.GetName()] = u
		}
	}
	return c.sync(ctx, &sc, k.cluster, locs)
}

// olderThan counts the collectors of siblings (those of u's namespace and cluster, u
// included) created before u, or at the same time with a smaller name.
func olderThan(u *unstructured.Unstructured, siblings []*unstructured.Unstructured) int {
	n := 0
	t := u.GetCreationTimestamp()
	for _, s := range siblings {
		st := s.GetCreationTimestamp()
		if st.Before(&t) || (st.Equal(&t) && s.GetName() < u.GetName()) {
			n++
		}
	}
	return n
}

// condition returns a condition of status, reason and message (its type, generation and time
// are set by writeStatus).
func condition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Status: status, Reason: reason, Message: message}
}

// sync recomputes one collector's summary within the collector's CEL budget, charges the
// cost to its namespace, and writes the summary and the collector's conditions
// when they changed. A resource whose informer has not synced yet makes it wait for the next
// round (no partial summary is written); neither is a summary whose evaluation spent its
// budget (the StatusSummary keeps its last results).
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
	withinBudget := condition(metav1.ConditionFalse, controlv1alpha1.ReasonWithinBudget, "the summary is computed within the namespace's limits and budgets")
	if len(p.errs) > 0 {
		msgs := make([]string, 0, len(p.errs))
		for _, e := range p.errs {
			msgs = append(msgs, e.Error())
		}
		return c.writeStatus(ctx, sc, condition(metav1.ConditionFalse, "CompilationFailed", contract.Truncate(strings.Join(msgs, "; "), 1024)), withinBudget)
	}
	gvrs, err := controlv1alpha1.ExactResources(sc.Spec.Resources)
	if err != nil {
		return c.writeStatus(ctx, sc, condition(metav1.ConditionFalse, "InvalidResources", err.Error()), withinBudget)
	}
	selector := labels.Everything()
	if sc.Spec.ObjectSelector != nil {
		if selector, err = metav1.LabelSelectorAsSelector(sc.Spec.ObjectSelector); err != nil {
			return c.writeStatus(ctx, sc, condition(metav1.ConditionFalse, "InvalidSelector", err.Error()), withinBudget)
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
	res, spent, err := p.program.SummarizeWithin(rows, c.cfg.CostPerSummary)
	throttled := c.queue.Charge(collectorKey{cluster: cluster, namespace: sc.Namespace}.tenant(), spent)
	if errors.Is(err, statuscollector.ErrBudgetExceeded) {
		msg := fmt.Sprintf("the CEL cost of the summary went past %d (--status-collector-cost-per-summary) after %d rows; the StatusSummary keeps its last results",
			c.cfg.CostPerSummary, res.Rows)
		return c.writeStatus(ctx, sc, condition(metav1.ConditionFalse, controlv1alpha1.ReasonBudgetExceeded, msg),
			condition(metav1.ConditionTrue, controlv1alpha1.ReasonBudgetExceeded, msg))
	}
	degraded := withinBudget
	if throttled {
		degraded = condition(metav1.ConditionTrue, controlv1alpha1.ReasonThrottled,
			"the namespace's StatusCollectors spent their CEL budget per second (--status-collector-cost-per-second): its summaries are computed less often")
	}
	res.CollectorGeneration = sc.Generation
	if err := c.writeSummary(ctx, sc, res); err != nil {
		return err
	}
	if len(res.Errors) > 0 {
		return c.writeStatus(ctx, sc, condition(metav1.ConditionFalse, controlv1alpha1.ReasonEvaluationFailed,
			fmt.Sprintf("expressions failed on some rows; the StatusSummary %s lists the first", sc.Name)), degraded)
	}
	return c.writeStatus(ctx, sc, condition(metav1.ConditionTrue, controlv1alpha1.ReasonSummarized, fmt.Sprintf("%d rows summarized", res.Rows)), degraded)
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
	assigned = bound.Keep(assigned)
	var out []statuscollector.Row
	for _, loc := range assigned {
		status, recorded, err := contract.StatusRecord(u.GetAnnotations(), loc)
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

// writeStatus sets sc's Ready and Degraded conditions (ready and degraded, of which it sets
// the type, generation and time) and observedGeneration when they changed.
func (c *Controller) writeStatus(ctx context.Context, sc *controlv1alpha1.StatusCollector, ready, degraded metav1.Condition) error {
	next := sc.Status.DeepCopy()
	next.ObservedGeneration = sc.Generation
	ready.Type, degraded.Type = controlv1alpha1.StatusCollectorReady, controlv1alpha1.StatusCollectorDegraded
	ready.ObservedGeneration, degraded.ObservedGeneration = sc.Generation, sc.Generation
	meta.SetStatusCondition(&next.Conditions, ready)
	meta.SetStatusCondition(&next.Conditions, degraded)
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
