package contract

// Annotation and label keys of docs/design.md ("Names").
const (
	// AssignedLocationsAnnotation names the locations a source object is assigned to: a JSON
	// array of location names (see ParseLocations).
	AssignedLocationsAnnotation = "kcp.io/assigned-locations"
	// ClusterAnnotation names the logical cluster of an object. kcp sets it on source objects;
	// a location view always shows it (the cluster of a plain source is configured).
	ClusterAnnotation = "kcp.io/cluster"
	// StatusPolicyAnnotation opts a source object in to status write-back (see ReflectsStatus).
	StatusPolicyAnnotation = "kcp.io/status-policy"
	// StatusLocationAnnotation names the location whose status fills the source's .status when
	// the object is assigned to several locations.
	StatusLocationAnnotation = "kcp.io/status-location"
	// StatusRecordAnnotationPrefix followed by a location name is the annotation holding that
	// location's .status (JSON) on the source object (see StatusRecordAnnotation).
	StatusRecordAnnotationPrefix = "status.kcp.io/"
	// SpecDiffAnnotationPrefix followed by a location name is the annotation holding that
	// location's RFC 6902 JSON patch of the object (see SpecDiffAnnotation).
	SpecDiffAnnotationPrefix = "spec-diff.kcp.io/"
	// LastAppliedConfigAnnotation is kubectl's client-side apply record; views never show it
	// (it can hold other locations' status records).
	LastAppliedConfigAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

	// LocationLabel is the label on every target object (and target namespace) a mapper
	// manages; its value is the location.
	LocationLabel = "kcp.io/location"
	// SourceClusterAnnotation, SourceNamespaceAnnotation, SourceNameAnnotation and
	// SourceUIDAnnotation name the source object of a target copy (invariant 2).
	SourceClusterAnnotation   = "kcp.io/source-cluster"
	SourceNamespaceAnnotation = "kcp.io/source-namespace"
	SourceNameAnnotation      = "kcp.io/source-name"
	SourceUIDAnnotation       = "kcp.io/source-uid"
	// SourceGenerationAnnotation, on a target copy, is the metadata.generation of the view
	// object it was applied from (a decimal integer; absent for objects without a
	// generation). A view's generation moves only with what the view shows outside .status
	// (docs/views.md), so the annotation changes only with an apply that changes the copy
	// anyway. A target's controller that observed the copy's metadata.generation
	// (status.observedGeneration) observed that view generation: the mapper reports it so,
	// and the Summarize policy turns it into the source's (docs/status.md).
	SourceGenerationAnnotation = "kcp.io/source-generation"

	// ControlNamespace is the namespace of the source that holds the control plane's Leases,
	// one per location, named after it.
	ControlNamespace = "cluster-mapper-system"
)

// Values of StatusPolicyAnnotation.
const (
	// StatusPolicyReflect lets locations write back their status.
	StatusPolicyReflect = "Reflect"
	// StatusPolicySummarize is StatusPolicyReflect, and for replica kinds .status is the sum
	// over locations.
	StatusPolicySummarize = "Summarize"
	// StatusPolicyNone (or no annotation) means no write-back.
	StatusPolicyNone = "None"
)

// MaxStatusRecordBytes is the largest status record (the JSON of one location's .status in
// status.kcp.io/<location>) a location may write: 32 KiB (docs/design.md, "Status records"), so that no
// location can use up the object's 256 KiB annotation budget and block its peers.
const MaxStatusRecordBytes = 32 * 1024

// StatusRecordAnnotation returns the key of location's status record, status.kcp.io/<location>.
func StatusRecordAnnotation(location string) string { return StatusRecordAnnotationPrefix + location }

// SpecDiffAnnotation returns the key of location's patch, spec-diff.kcp.io/<location>.
func SpecDiffAnnotation(location string) string { return SpecDiffAnnotationPrefix + location }

// ReflectsStatus reports whether an object with these annotations opted in to status
// write-back: its StatusPolicyAnnotation is StatusPolicyReflect or StatusPolicySummarize.
func ReflectsStatus(annotations map[string]string) bool {
	switch annotations[StatusPolicyAnnotation] {
	case StatusPolicyReflect, StatusPolicySummarize:
		return true
	}
	return false
}
