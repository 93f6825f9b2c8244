package customization

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/rendercheck"
	"github.com/cluster-mapper/cluster-mapper/pkg/specdiff"
)

// Reasons of a RenderError (and of a CustomizationFailure in a Customization's status).
const (
	// ReasonCompilationFailed: the Customization does not compile (see CompileError).
	ReasonCompilationFailed = controlv1alpha1.ReasonCompilationFailed
	// ReasonMatchConditionFailed: a matchCondition failed to evaluate (an error, the cost
	// limit), so whether the Customization applies is unknown.
	ReasonMatchConditionFailed = "MatchConditionFailed"
	// ReasonMutationFailed: a mutation failed: its expression (an error, the cost limit), a
	// JSON patch that does not apply, an apply configuration the schema refuses, or no schema.
	ReasonMutationFailed = "MutationFailed"
	// ReasonProtectedFieldChanged: a mutation, or the object's spec-diff.kcp.io/<location>
	// patch, would change what a rendering may not change (rendercheck.Changed: identity,
	// version, lifecycle, status, the kcp.io marks); Err wraps a *rendercheck.Refusal.
	ReasonProtectedFieldChanged = rendercheck.ReasonProtectedFieldChanged
	// ReasonRenderingTooLarge: after a mutation, or the spec-diff.kcp.io/<location> patch, the
	// rendering is larger than Options.MaxRenderingBytes; Err wraps a *rendercheck.Refusal.
	ReasonRenderingTooLarge = rendercheck.ReasonTooLarge
	// ReasonSpecDiffFailed: the object's spec-diff.kcp.io/<location> patch cannot be applied
	// (Err is a *specdiff.Error).
	ReasonSpecDiffFailed = "SpecDiffFailed"
	// ReasonInternalError: the machinery panicked; the panic was recovered.
	ReasonInternalError = "InternalError"
	// ReasonLimitExceeded: the Customization is over its namespace's Limits and not applied.
	ReasonLimitExceeded = controlv1alpha1.ReasonLimitExceeded
)

// RenderError is a rendering that failed: the object cannot be shown as it would land on the
// target, so the view keeps its last rendering or withholds it ("failures never
// delete"). It names the Customization (empty for the spec-diff patch) and what failed.
type RenderError struct {
	// Customization is the name of the Customization that failed; "" for the object's own
	// spec-diff.kcp.io/<location> patch.
	Customization string
	// Namespace and Cluster are the Customization's ("" for spec-diff; Cluster "" on a plain
	// source built without PlainCluster).
	Namespace, Cluster string
	// Field is the spec field that failed, e.g. "spec.mutations[1]"; "" when not one field.
	Field string
	// Reason is one of the Reason constants.
	Reason string
	// Err says why.
	Err error
}

// Error implements error.
func (e *RenderError) Error() string {
	if e.Customization == "" {
		return fmt.Sprintf("%s: %v", e.Reason, e.Err)
	}
	where := RuleKey{Cluster: e.Cluster, Namespace: e.Namespace, Name: e.Customization}.String()
	if e.Field != "" {
		where += " " + e.Field
	}
	return fmt.Sprintf("Customization %s: %s: %v", where, e.Reason, e.Err)
}

// Unwrap returns the underlying error.
func (e *RenderError) Unwrap() error { return e.Err }

// objectInterfaces are what the JSONPatch patcher needs to encode and decode an object; with
// unstructured objects only the JSON serializer's unstructured path is used.
var objectInterfaces = admission.NewObjectInterfacesFromScheme(runtime.NewScheme())

// Render implements Rules. The Customizations see the object as the view shows it (without
// spec-diff.kcp.io/ annotations) and the location as `location`; each runs as a
// MutatingAdmissionPolicy would (matchConditions, then its mutations in order, each with
// k8s.io/apiserver's runtime cost budget). Then the object's own patch is applied and every
// spec-diff.kcp.io/ annotation removed. A panic in the machinery is recovered into a
// RenderError of reason ReasonInternalError.
func (s *Snapshot) Render(ctx context.Context, gvr schema.GroupVersionResource, cluster string, obj *unstructured.Unstructured, location string) (out *unstructured.Unstructured, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, &RenderError{Reason: ReasonInternalError, Err: fmt.Errorf("rendering panicked: %v", p)}
		}
	}()
	diff, _ := specdiff.Patch(obj, location)
	cur := obj
	loc := &locationRef{s: s, name: location}
	if rs := s.selecting(gvr, cluster, obj.GetNamespace(), unstructuredLabels(labelsOf(obj)), loc); len(rs) > 0 {
		// Only drops the annotations (copying obj if it has some); cannot fail without a patch.
		cur, _ = specdiff.Apply(obj, location, "")
		ctx = withLocation(ctx, loc.get().binding)
		for _, r := range rs {
			if cur, err = s.apply(ctx, r, gvr, cur); err != nil {
				return nil, err
			}
		}
	}
	out, err = specdiff.Apply(cur, location, diff)
	if err == nil && out != cur {
		err = rendercheck.TooLarge(out, s.maxRenderingBytes()).AsError()
	}
	if err != nil {
		return nil, &RenderError{Reason: refusalReason(err, ReasonSpecDiffFailed), Err: err}
	}
	if out == obj {
		out = obj.DeepCopy()
	}
	return out, nil
}

// apply runs one Customization on in (not modified) and returns the result, in itself when
// its matchConditions do not all hold.
func (s *Snapshot) apply(ctx context.Context, r *compiled, gvr schema.GroupVersionResource, in *unstructured.Unstructured) (out *unstructured.Unstructured, err error) {
	fail := func(field, reason string, err error) error {
		return &RenderError{Customization: r.key.Name, Namespace: r.key.Namespace, Cluster: r.key.Cluster, Field: field, Reason: reason, Err: err}
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fail("", ReasonInternalError, fmt.Errorf("rendering panicked: %v", p))
		}
	}()
	if r.limited != "" {
		return nil, fail("", ReasonLimitExceeded, errors.New(r.limited))
	}
	if len(r.errs) > 0 {
		return nil, fail("", ReasonCompilationFailed, r.compileErr())
	}
	ctx = r.compiler.CreateContext(ctx)
	gvk := in.GroupVersionKind()
	vattrs := &admission.VersionedAttributes{
		Attributes:      admission.NewAttributesRecord(in, nil, gvk, in.GetNamespace(), in.GetName(), gvr, "", "", nil, false, nil),
		VersionedKind:   gvk,
		VersionedObject: in,
	}
	meter := meterFrom(ctx)
	if meter != nil && meter.exceeded() {
		return nil, fail("", ReasonBudgetExceeded, meter.exceededError())
	}
	if r.matcher != nil {
		res := r.matcher.Match(ctx, vattrs, nil, nil)
		if meter != nil && meter.exceeded() {
			return nil, fail("spec.matchConditions", ReasonBudgetExceeded, meter.exceededError())
		}
		if res.Error != nil {
			return nil, fail("spec.matchConditions", ReasonMatchConditionFailed, res.Error)
		}
		if !res.Matches {
			return in, nil
		}
	}
	for i, p := range r.patchers {
		field := fmt.Sprintf("spec.mutations[%d]", i)
		req := patch.Request{MatchedResource: gvr, VersionedAttributes: vattrs, ObjectInterfaces: objectInterfaces}
		if r.applyConfiguration[i] {
			if req.TypeConverter = s.typeConverter(gvk); req.TypeConverter == nil {
				return nil, fail(field, ReasonMutationFailed, fmt.Errorf("no schema for %s: an ApplyConfiguration needs the resource's OpenAPI schema", gvk))
			}
		}
		o, err := p.Patch(ctx, req, meter.budget())
		if meter != nil && meter.exceeded() {
			return nil, fail(field, ReasonBudgetExceeded, meter.exceededError())
		}
		if err != nil {
			return nil, fail(field, ReasonMutationFailed, err)
		}
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				return nil, fail(field, ReasonMutationFailed, err)
			}
			u = &unstructured.Unstructured{Object: m}
		}
		// Each mutation's result is checked before the next runs (pkg/rendercheck): no
		// mutation may change a protected field, even one a later mutation would restore, and
		// a rendering that grew too large stops here, so nothing larger is kept.
		if err := rendercheck.Check(in, u, s.maxRenderingBytes()); err != nil {
			return nil, fail(field, refusalReason(err, ReasonMutationFailed), err)
		}
		vattrs.VersionedObject = u
	}
	return vattrs.VersionedObject.(*unstructured.Unstructured), nil
}

// typeConverter returns the schema of gvk for ApplyConfiguration, nil when unknown.
func (s *Snapshot) typeConverter(gvk schema.GroupVersionKind) managedfields.TypeConverter {
	if s.opts.TypeConverters == nil {
		return nil
	}
	return s.opts.TypeConverters.GetTypeConverter(gvk)
}
