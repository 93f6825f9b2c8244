package contract

import "strings"

// The names the deletion protocol, apply outcomes and dependencies add to the contract
// (docs/design.md, "Names").
const (
	// LocationFinalizerPrefix followed by a location name is that location's finalizer on
	// source objects (see LocationFinalizer): added through the location's view before the
	// location's first copy of the object exists, removed by the location once its copy is
	// gone.
	LocationFinalizerPrefix = "locations.mapper.kcp.io/"
	// DeletionPolicyAnnotation on a source object says what happens to its copies when it is
	// deleted or unassigned: DeletionPolicyOrphan leaves them in place, unmarked; absent,
	// they are deleted.
	DeletionPolicyAnnotation = "kcp.io/deletion-policy"
	// OutcomeAnnotationPrefix followed by a location name is the annotation holding that
	// location's apply outcome (JSON: reason, message, observedGeneration, time), written only
	// while the location cannot apply the object (see OutcomeAnnotation).
	OutcomeAnnotationPrefix = "outcome.kcp.io/"
	// DependenciesAnnotation on a workload opts it out of dependency following
	// (DependenciesIgnore).
	DependenciesAnnotation = "control.mapper.kcp.io/dependencies"
)

// Values of DeletionPolicyAnnotation and DependenciesAnnotation.
const (
	// DeletionPolicyOrphan leaves a deleted or unassigned object's copies on the targets,
	// without the marks of a managed copy.
	DeletionPolicyOrphan = "Orphan"
	// DependenciesIgnore: what the workload references does not follow it.
	DependenciesIgnore = "Ignore"
)

// MaxOutcomeRecordBytes is the largest apply outcome record (outcome.kcp.io/<location>) a
// location writes: 4 KiB.
const MaxOutcomeRecordBytes = 4 * 1024

// LocationFinalizer returns location's finalizer, locations.mapper.kcp.io/<location>.
func LocationFinalizer(location string) string { return LocationFinalizerPrefix + location }

// FinalizerLocation returns the location whose finalizer f is, and false when f is not a
// location finalizer (or names no location).
func FinalizerLocation(f string) (string, bool) {
	loc, ok := strings.CutPrefix(f, LocationFinalizerPrefix)
	if !ok || ValidateLocationName(loc) != nil {
		return "", false
	}
	return loc, true
}

// OutcomeAnnotation returns the key of location's apply outcome record, outcome.kcp.io/<location>.
func OutcomeAnnotation(location string) string { return OutcomeAnnotationPrefix + location }

// The marks of a related copy: an object that a location's mapper brings up from its target
// into the source, through its view, for a ResourceMapping's related entry of origin Target
// (docs/resourcemapping.md, "Related objects"). Every related copy carries all three labels
// and an ownerReference to its main object; a view accepts create, update and delete only of
// the related copies marked with its own location (docs/views.md, "Writes").
const (
	// RelatedLocationLabel is the location whose mapper brought the copy up.
	RelatedLocationLabel = "related.kcp.io/location"
	// RelatedOwnerUIDLabel is the metadata.uid of the main source object the copy belongs to.
	RelatedOwnerUIDLabel = "related.kcp.io/owner-uid"
	// RelatedIdentifierLabel is the identifier of the ResourceMapping's related entry.
	RelatedIdentifierLabel = "related.kcp.io/identifier"
	// RelatedMappingAnnotation is the name of the ResourceMapping whose entry made the copy.
	RelatedMappingAnnotation = "related.kcp.io/mapping"
)
