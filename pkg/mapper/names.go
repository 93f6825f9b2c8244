package mapper

// reservedPrefixes are the label and annotation key prefixes (the part before "/") that belong
// to kcp and to the mapper. Source keys with these prefixes (the assignment, the logical
// cluster, the per-location status records status.kcp.io/<location>, the apply outcome records
// outcome.kcp.io/<location>, the status policy, the marks of a related copy related.kcp.io/*)
// are control-plane bookkeeping of the source and are not copied: on the target the kcp.io
// prefix carries the mapper's own marking (LocationLabel, Source*Annotation).
var reservedPrefixes = []string{"kcp.io", "status.kcp.io", "spec-diff.kcp.io", "outcome.kcp.io", "related.kcp.io"}
