package contract

// RelatedCopyLocation returns the location a related copy belongs to: the value of its
// RelatedLocationLabel, when that is a location name (ValidateLocationName). ok is false for
// an object that is no related copy (no such label, or a value that names no location).
//
// A related copy is shown in the view of its location only, whatever its
// kcp.io/assigned-locations says, and only that location may update or delete it through its
// view (docs/views.md, "Related copies"). A location's mapper never copies such an object
// onto its target: it is the copy of something its target made (docs/resourcemapping.md,
// "Related objects").
func RelatedCopyLocation(labels map[string]string) (location string, ok bool) {
	loc, has := labels[RelatedLocationLabel]
	if !has || ValidateLocationName(loc) != nil {
		return "", false
	}
	return loc, true
}
