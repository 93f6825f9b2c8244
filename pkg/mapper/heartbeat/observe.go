package heartbeat

import (
	"fmt"

	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/verify"
	"github.com/cluster-mapper/cluster-mapper/pkg/schemacompat"
)

// Observation is what a mapper reports about its location at one moment.
type Observation struct {
	// Ready, Reason and Message are the mapper's own view of its Ready condition.
	Ready   metav1.ConditionStatus
	Reason  string
	Message string
	// Resources are the view's resources, synced or halted.
	Resources []controlv1alpha1.ResourceState
	// MappingProblems name the ResourceMappings of the view that are not in force
	// (mapper.Mapper.MappingProblems).
	MappingProblems []string
	// Objects are the counts of the latest verification; nil before the first.
	Objects *controlv1alpha1.ObjectCounts
	// Capacity is the sum of the target nodes' allocatable cpu, memory and pods; nil when
	// the nodes cannot be listed.
	Capacity corev1.ResourceList
}

// TargetUnreachableMessage is the Ready condition's message when the target cannot be reached.
// It says nothing of the error, which the mapper logs (docs/locations.md).
const TargetUnreachableMessage = "The target cluster cannot be reached; the mapper's log says why."

// Observer computes Observations of a running mapper.
type Observer struct {
	// Mapper is the running mapper (its resources' states and initial sync).
	Mapper *mapper.Mapper
	// Target reaches the target cluster: its version (reachability) and nodes (capacity).
	Target kubernetes.Interface
	// Verify is the configuration of `mapper verify` for the counts; SkipContent is advised
	// (existence and marking only), since it runs once per status interval.
	Verify verify.Config
}

// Observe returns the current observation. verifyNow runs the verification (a full read
// of the view and the target's managed objects); otherwise Objects is nil and the caller
// keeps its previous counts.
func (o *Observer) Observe(ctx context.Context, verifyNow bool) Observation {
	logger := klog.FromContext(ctx)
	obs := Observation{Ready: metav1.ConditionTrue, Reason: controlv1alpha1.ReasonMapperReady, Message: "The mapper leads and maps the location's view onto its target."}
	if _, err := o.Target.Discovery().ServerVersion(); err != nil {
		// The error stays in the log: it names addresses, ports and TLS details of whatever
		// the kubeconfig points at, and the SyncTarget's status is read by everyone who may
		// read SyncTargets (a push-mode kubeconfig Secret would otherwise probe ports).
		logger.Info("The target cluster cannot be reached", "err", err)
		obs.Ready, obs.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonTargetUnreachable
		obs.Message = TargetUnreachableMessage
	} else if !o.Mapper.InitialSyncComplete() {
		obs.Ready, obs.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonInitialSync
		obs.Message = "The initial sync of the location's view is in progress."
	}
	for _, r := range o.Mapper.ResourceStates() {
		if !r.Known {
			continue
		}
		obs.Resources = append(obs.Resources, ResourceStateOf(r))
	}
	obs.MappingProblems = o.Mapper.MappingProblems()
	if obs.Ready == metav1.ConditionTrue {
		obs.Capacity = o.capacity(ctx)
	}
	if verifyNow && obs.Ready == metav1.ConditionTrue {
		start := time.Now()
		report, err := verify.Run(ctx, o.Verify)
		if err != nil {
			logger.Info("Cannot verify the location for its SyncTarget's counts; keeping the previous ones", "err", err)
		} else {
			obs.Objects = Counts(report, metav1.Now())
			logger.V(2).Info("Verified the location", "assigned", obs.Objects.Assigned, "inViolation", obs.Objects.InViolation, "duration", time.Since(start))
		}
	}
	return obs
}

// ResourceStateOf is the status.resources entry of one of the mapper's resources: Halted
// (TargetLacksResource) while the target does not serve it; otherwise Synced, with the reason
// SchemaIncompatible or SchemaCompatibilityUnknown and the comparison's findings as the
// message (".spec.name: maxLength 8 on the target, 64 in the source") when the target's schema
// of its kind may not accept what the source's allows (docs/locations.md,
// "Resource compatibility"); otherwise, when some of its objects are not mapped because their
// target place is taken, the reason ObjectsInConflict and their number.
func ResourceStateOf(r mapper.ResourceState) controlv1alpha1.ResourceState {
	s := controlv1alpha1.ResourceState{Resource: r.Resource, State: controlv1alpha1.ResourceSynced}
	switch {
	case r.Halted && r.Blocked != "":
		s.State, s.Reason = controlv1alpha1.ResourceHalted, controlv1alpha1.ReasonMappingsNotAccepted
		s.Message = contract.Truncate(r.Blocked+".", 1024)
	case r.Halted:
		s.State, s.Reason = controlv1alpha1.ResourceHalted, controlv1alpha1.ReasonTargetLacksResource
		s.Message = "The target does not serve this resource (is its CRD missing?); its objects wait until it does."
	case r.Schema.Verdict == schemacompat.Incompatible:
		s.Reason, s.Message = controlv1alpha1.ReasonSchemaIncompatible, contract.Truncate(r.Schema.Message, 1024)
	case r.Schema.Verdict == schemacompat.Unknown:
		s.Reason, s.Message = controlv1alpha1.ReasonSchemaUnknown, contract.Truncate(r.Schema.Message, 1024)
	case r.Conflicts > 0:
		s.Reason = controlv1alpha1.ReasonObjectsInConflict
		s.Message = fmt.Sprintf("%d objects of this resource are not mapped: their target place is taken by another source object's copy or an object the mapper does not manage; each one's outcome record says which.", r.Conflicts)
		if r.Conflicts == 1 {
			s.Message = "1 object of this resource is not mapped: its target place is taken by another source object's copy or an object the mapper does not manage; its outcome record says which."
		}
	}
	return s
}

// Counts turns a verification report into a SyncTarget's object counts: assigned is the
// number of view objects, inViolation the number of violations, inSync the assigned objects
// none of whose violations names them as source.
func Counts(r *verify.Report, at metav1.Time) *controlv1alpha1.ObjectCounts {
	bad := map[string]bool{}
	for _, v := range r.Violations {
		if v.Source != "" {
			bad[v.Resource+"|"+v.Source] = true
		}
	}
	inSync := int64(r.ViewObjects - len(bad))
	if inSync < 0 {
		inSync = 0
	}
	return &controlv1alpha1.ObjectCounts{Assigned: int64(r.ViewObjects), InSync: inSync, InViolation: int64(r.Total), VerifiedTime: &at}
}

// capacity sums the allocatable cpu, memory and pods of the target's nodes; nil when they
// cannot be listed (the mapper's identity on the target may not list nodes).
func (o *Observer) capacity(ctx context.Context) corev1.ResourceList {
	sum := corev1.ResourceList{}
	list, err := o.Target.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Cannot list the target's nodes for the capacity", "err", err)
		return nil
	}
	for _, n := range list.Items {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			if q, ok := n.Status.Allocatable[name]; ok {
				total := sum[name]
				if total.Format == "" {
					total = resource.Quantity{Format: q.Format}
				}
				total.Add(q)
				sum[name] = total
			}
		}
	}
	return sum
}
