package mapper

// Names shared with the source, the location views and the target cluster. They are the
// contract of ../../shared/DESIGN.md ("Names"); the mapper reads the first group on view objects
// and writes the second group on target objects.
const (
	// AssignedLocationsAnnotation is the annotation on source objects naming the locations an
	// object is assigned to (a JSON array). The view already filters by it; the mapper only
	// keeps it off the target copy.
	AssignedLocationsAnnotation = "kcp.io/assigned-locations"
	// ClusterAnnotation names the logical cluster of a source object (set by kcp). A plain
	// Kubernetes source does not set it; its objects belong to the cluster named by
	// --cluster-name.
	ClusterAnnotation = "kcp.io/cluster"
	// StatusPolicyAnnotation opts a source object in to status reflection when its value is
	// StatusPolicyReflect; absent or "None" means no write-back.
	StatusPolicyAnnotation = "kcp.io/status-policy"
	// StatusPolicyReflect is the StatusPolicyAnnotation value that turns status reflection on.
	StatusPolicyReflect = "Reflect"

	// LocationLabel is the label on every target object (and target namespace) a mapper
	// manages; its value is the location. It is the only selector the mapper uses on the
	// target: nothing without it is ever changed or deleted.
	LocationLabel = "kcp.io/location"
	// SourceClusterAnnotation, SourceNamespaceAnnotation, SourceNameAnnotation and
	// SourceUIDAnnotation name the source object of a target copy (invariant 2). On a target
	// namespace made by the prefixed namespace mapping, the first two keep the original
	// logical cluster and namespace.
	SourceClusterAnnotation   = "kcp.io/source-cluster"
	SourceNamespaceAnnotation = "kcp.io/source-namespace"
	SourceNameAnnotation      = "kcp.io/source-name"
	SourceUIDAnnotation       = "kcp.io/source-uid"
)

// reservedPrefixes are the label and annotation key prefixes (the part before "/") that belong
// to kcp and to the mapper. Source keys with these prefixes (the assignment, the logical
// cluster, the per-location status records status.kcp.io/<location>, the status policy) are
// control-plane bookkeeping of the source and are not copied: on the target the kcp.io prefix
// carries the mapper's own marking (LocationLabel, Source*Annotation).
var reservedPrefixes = []string{"kcp.io", "status.kcp.io"}
