package customization

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// Failure is one (object, location) whose rendering a Customization's mutation failed on.
type Failure struct {
	// Customization is the Customization whose mutation failed.
	Customization RuleKey
	// Resource is the object's resource ("deployments.apps"); Namespace and Name its identity.
	Resource, Namespace, Name string
	// Location is the location whose rendering failed.
	Location string
	// Reason is RenderError.Reason (MutationFailed, ...); Message says what failed.
	Reason, Message string
}

// fieldManager names the StatusWriter's writes.
const fieldManager = "mapper-controller-customization-status"

// Failures are the (object, location) pairs of one Customization whose rendering fails.
type Failures struct {
	// Count is how many there are.
	Count int64
	// Some are some of them, in no particular order, at least the first
	// controlv1alpha1.MaxCustomizationFailures in the order of resource, namespace/name and
	// location (each location's first ones, as `locations` lists them, hold them).
	Some []Failure
}

// maxFailureMessage bounds the message of one failure in a Customization's status.
const maxFailureMessage = 256

// Observed is what a StatusWriter reports of the views besides the compile errors of the
// Follower's snapshot. mapper-controller observes both: the selections from the source's
// objects (its metadata informers), the failures from the renderings mapper-apiserver reports
// in `locations` (status.customizationFailures).
type Observed struct {
	// Selected returns how many (object, location) pairs each Customization of s selects
	// (Snapshot.SelectedObjects); ok is false while that is not known (no status is written).
	Selected func(s *Snapshot) (selected map[RuleKey]int64, ok bool)
	// Failures returns, per Customization, the (object, location) pairs whose rendering it
	// fails (a Customization without any is left out); ok is false while that is not known
	// (no status is written).
	Failures func() (failures map[RuleKey]Failures, ok bool)
}

// StatusWriter keeps the status of every Customization current (docs/customization.md,
// "Status"): the Compiled condition from the compile errors of the Follower's snapshot, the
// Ready condition, the number of (object, location) pairs it selects, the count and the first
// few (controlv1alpha1.MaxCustomizationFailures) of the failing ones, and observedGeneration. A
// status is written (with the Customization's resourceVersion as precondition) only when it
// differs from the one the source holds; a conflict is retried on the next round.
//
// mapper-controller runs it under its leader election: one writer at a time.
type StatusWriter struct {
	follower *Follower
	observed Observed
	// throttled reports whether a namespace spent its CEL budget per second (nil: never).
	throttled func(cluster, namespace string) bool
	client    func(cluster string) (dynamic.Interface, error)
	interval  time.Duration
	now       func() time.Time
}

// NewStatusWriter returns a StatusWriter for the Customizations of follower, with what observed
// reports, writing through client(cluster) (the source's client of that logical cluster), every
// interval.
func NewStatusWriter(follower *Follower, observed Observed, client func(cluster string) (dynamic.Interface, error), interval time.Duration) *StatusWriter {
	return &StatusWriter{follower: follower, observed: observed, client: client, interval: interval, now: time.Now}
}

// WithThrottled makes the Degraded condition say Throttled while throttled(cluster,
// namespace) reports that the Customization's namespace spent its CEL budget per second (the
// cache's Renderer.Throttled). It returns w.
func (w *StatusWriter) WithThrottled(throttled func(cluster, namespace string) bool) *StatusWriter {
	w.throttled = throttled
	return w
}

// Run writes statuses every interval until ctx ends, once the follower has synced.
func (w *StatusWriter) Run(ctx context.Context) {
	wait.UntilWithContext(ctx, w.Sync, w.interval)
}

// Sync writes the status of each Customization whose status changed; it returns after one
// round. It writes nothing until the follower has synced and what it observes is known.
func (w *StatusWriter) Sync(ctx context.Context) {
	if !w.follower.HasSynced() {
		return
	}
	snapshot := w.follower.Snapshot()
	limited := snapshot.Limited()
	selected, ok := w.observed.Selected(snapshot)
	if !ok {
		return
	}
	failures, ok := w.observed.Failures()
	if !ok {
		return
	}
	compileErrs := map[RuleKey][]CompileError{}
	for _, e := range snapshot.CompileErrors() {
		k := RuleKey{Cluster: e.Cluster, Namespace: e.Namespace, Name: e.Name}
		compileErrs[k] = append(compileErrs[k], e)
	}
	for _, c := range w.follower.Customizations() {
		k := w.follower.key(c)
		n, counted := selected[k]
		if !counted {
			continue // not in the snapshot yet (created after it), or being deleted
		}
		throttled := w.throttled != nil && w.throttled(k.Cluster, k.Namespace)
		status := desiredStatus(c, compileErrs[k], failures[k], n, limited[k], throttled, metav1.NewTime(w.now()))
		if apiequality.Semantic.DeepEqual(c.Status, status) {
			continue
		}
		if err := w.write(ctx, k, c, status); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Info("Writing a Customization's status failed; retrying", "customization", k.String(), "err", err)
		}
	}
}

// write updates c's status subresource to status.
func (w *StatusWriter) write(ctx context.Context, k RuleKey, c *controlv1alpha1.Customization, status controlv1alpha1.CustomizationStatus) error {
	client, err := w.client(k.Cluster)
	if err != nil {
		return err
	}
	updated := c.DeepCopy()
	updated.Status = status
	updated.SetGroupVersionKind(controlv1alpha1.SchemeGroupVersion.WithKind("Customization"))
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(updated)
	if err != nil {
		return err
	}
	_, err = client.Resource(Resource).Namespace(c.Namespace).UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{FieldManager: fieldManager})
	return err
}

// tail returns s, or when it is longer than max bytes "…" and its last max bytes (on a rune
// boundary): an evaluation error names the cause last, after the expression it quotes.
func tail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := len(s) - max
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return "…" + s[i:]
}

// desiredStatus returns c's status given its compile errors, failures, the number of (object,
// location) pairs it selects, why the snapshot does not apply it (limited, "" when it does) and
// whether its namespace is throttled; conditions keep their lastTransitionTime unless their
// status changes (meta.SetStatusCondition).
func desiredStatus(c *controlv1alpha1.Customization, compileErrs []CompileError, failures Failures, selected int64, limited string, throttled bool, now metav1.Time) controlv1alpha1.CustomizationStatus {
	s := *c.Status.DeepCopy()
	s.ObservedGeneration = c.Generation
	s.SelectedObjects = &selected
	compiled := metav1.Condition{Type: controlv1alpha1.CustomizationCompiled, Status: metav1.ConditionTrue,
		Reason: controlv1alpha1.ReasonCompiled, Message: "every expression compiled", ObservedGeneration: c.Generation, LastTransitionTime: now}
	ready := metav1.Condition{Type: controlv1alpha1.CustomizationReady, Status: metav1.ConditionTrue,
		Reason: controlv1alpha1.ReasonAllObjectsRendered, Message: fmt.Sprintf("every one of the %d selected (object, location) pairs rendered", selected),
		ObservedGeneration: c.Generation, LastTransitionTime: now}
	if selected == 0 {
		ready.Reason = controlv1alpha1.ReasonNoObjectsSelected
		ready.Message = "the Customization selects no (object, location) pair: no object of its namespace, of the resources it names, " +
			"with labels its objectSelector selects, is assigned to a location its locationSelector and locationNames select"
	}
	if len(compileErrs) > 0 {
		msgs := make([]string, 0, len(compileErrs))
		for _, e := range compileErrs {
			msgs = append(msgs, e.Field+": "+e.Err.Error())
		}
		compiled.Status, compiled.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonCompilationFailed
		compiled.Message = contract.Truncate(strings.Join(msgs, "; "), 1024)
		ready.Status, ready.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonCompilationFailed
		ready.Message = "the Customization does not compile; the views keep the last rendering of the objects it selects, and withhold objects that never rendered"
	}
	some := slices.Clone(failures.Some)
	slices.SortFunc(some, func(a, b Failure) int {
		return strings.Compare(a.Resource+"/"+a.Namespace+"/"+a.Name+"/"+a.Location, b.Resource+"/"+b.Namespace+"/"+b.Name+"/"+b.Location)
	})
	s.FailingObjects = failures.Count
	s.Failures = nil
	for _, f := range some[:min(len(some), controlv1alpha1.MaxCustomizationFailures)] {
		s.Failures = append(s.Failures, controlv1alpha1.CustomizationFailure{
			Resource: f.Resource, Name: f.Namespace + "/" + f.Name, Location: f.Location,
			Reason: f.Reason, Message: tail(f.Message, maxFailureMessage),
		})
	}
	if failures.Count > 0 && len(compileErrs) == 0 {
		ready.Status, ready.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonRenderFailed
		ready.Message = fmt.Sprintf("%d (object, location) pairs failed to render; their views keep the last rendering that succeeded, or withhold objects that never rendered", failures.Count)
	}
	meta.SetStatusCondition(&s.Conditions, compiled)
	meta.SetStatusCondition(&s.Conditions, ready)
	meta.SetStatusCondition(&s.Conditions, degraded(c.Generation, failures.Some, limited, throttled, now))
	return s
}

// degraded returns the Degraded condition of a Customization of generation, given its
// failures, why it is limited ("" when not) and whether its namespace is throttled.
func degraded(generation int64, failures []Failure, limited string, throttled bool, now metav1.Time) metav1.Condition {
	c := metav1.Condition{Type: controlv1alpha1.CustomizationDegraded, Status: metav1.ConditionTrue,
		ObservedGeneration: generation, LastTransitionTime: now}
	overBudget := 0
	for _, f := range failures {
		if f.Reason == ReasonBudgetExceeded {
			overBudget++
		}
	}
	switch {
	case limited != "":
		c.Reason, c.Message = controlv1alpha1.ReasonLimitExceeded, contract.Truncate(limited, 1024)+
			"; the objects it selects keep their last rendering, and objects that never rendered are withheld"
	case overBudget > 0:
		c.Reason = controlv1alpha1.ReasonBudgetExceeded
		c.Message = fmt.Sprintf("the CEL cost of rendering %d (object, location) pairs went past the budget per object version (--render-cost-per-object); "+
			"the Customization is not applied to them: they keep their last rendering, or are withheld if they never rendered", overBudget)
	case throttled:
		c.Reason = controlv1alpha1.ReasonThrottled
		c.Message = "the namespace's Customizations spent their CEL budget per second (--render-cost-per-second): the renderings of its objects wait, and their views show the previous rendering meanwhile"
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, controlv1alpha1.ReasonWithinBudget, "every rendering is within the namespace's limits and budgets"
	}
	return c
}
