package statusrecords

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// summarizedKinds are the replica kinds whose status the Summarize policy sums over locations
// (docs/design.md "Names", kcp.io/status-policy: Summarize; docs/status.md).
var summarizedKinds = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}:  true,
	{Group: "apps", Kind: "StatefulSet"}: true,
	{Group: "apps", Kind: "ReplicaSet"}:  true,
}

// Summarizes reports whether the Summarize policy sums the status of objects of kind gk.
func Summarizes(gk schema.GroupKind) bool { return summarizedKinds[gk] }

// summedFields are the replica counters of the apps/v1 status types that a summary adds up.
var summedFields = []string{
	"replicas", "readyReplicas", "availableReplicas", "updatedReplicas", "unavailableReplicas",
	"currentReplicas", "fullyLabeledReplicas", "terminatingReplicas",
}

// Summarize returns the summary of the per-location statuses of a replica kind
// (docs/status.md, "Summarize"), for an object assigned to locations. records maps a
// location to its status (its status.kcp.io/<location> record, or the one location's
// .status); a location without one reports nothing yet.
//
//   - Each replica counter (replicas, readyReplicas, availableReplicas, updatedReplicas,
//     unavailableReplicas, currentReplicas, fullyLabeledReplicas, terminatingReplicas) is the sum
//     over the locations that report it; a counter no location reports is left out.
//   - observedGeneration is not set here: it needs the views' generations (ObservedGeneration).
//   - A condition type reported by some location is True only when every location reports it
//     True; False when some location reports False; Unknown otherwise (a location that does
//     not report it, or reports Unknown). Its reason and message are those of the first
//     location, in name order, that is not True ("<location>: <message>"), or of the first
//     location when all are True; its lastTransitionTime is the latest of the locations'.
//   - Nothing else is kept (revisions, collisionCount, selectors are per cluster).
func Summarize(locations []string, records map[string]map[string]interface{}) map[string]interface{} {
	locs := slices.Clone(locations)
	slices.Sort(locs)
	out := map[string]interface{}{}
	for _, f := range summedFields {
		var sum int64
		seen := false
		for _, l := range locs {
			if v, ok := asInt(records[l][f]); ok {
				sum += v
				seen = true
			}
		}
		if seen {
			out[f] = sum
		}
	}
	if conds := summarizeConditions(locs, records); len(conds) > 0 {
		out["conditions"] = conds
	}
	return out
}

// summarizeConditions combines the conditions of the locations (see Summarize), in the order
// in which their types first appear (locations in name order).
func summarizeConditions(locs []string, records map[string]map[string]interface{}) []interface{} {
	var types []string
	byLoc := map[string]map[string]map[string]interface{}{}
	for _, l := range locs {
		byLoc[l] = map[string]map[string]interface{}{}
		list, _ := records[l]["conditions"].([]interface{})
		for _, c := range list {
			m, _ := c.(map[string]interface{})
			t, _ := m["type"].(string)
			if t == "" {
				continue
			}
			if _, dup := byLoc[l][t]; dup {
				continue
			}
			byLoc[l][t] = m
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
	}
	out := make([]interface{}, 0, len(types))
	for _, t := range types {
		status := "True"
		var culprit, first map[string]interface{}
		culpritLoc, firstLoc, latest := "", "", ""
		for _, l := range locs {
			c := byLoc[l][t]
			s, _ := c["status"].(string)
			if c != nil && first == nil {
				first, firstLoc = c, l
			}
			if ts, _ := c["lastTransitionTime"].(string); ts > latest {
				latest = ts
			}
			switch {
			case s == "True":
				continue
			case s == "False":
				status = "False"
			case status != "False":
				status = "Unknown"
			}
			if culprit == nil || (s == "False" && culprit["status"] != "False") {
				culprit, culpritLoc = c, l
				if culprit == nil {
					culprit = map[string]interface{}{"reason": "NotReported", "message": "the location reports no " + t + " condition"}
				}
			}
		}
		src, srcLoc := first, firstLoc
		if culprit != nil {
			src, srcLoc = culprit, culpritLoc
		}
		c := map[string]interface{}{"type": t, "status": status}
		if r, _ := src["reason"].(string); r != "" {
			c["reason"] = r
		}
		msg, _ := src["message"].(string)
		c["message"] = strings.TrimSpace(srcLoc + ": " + msg)
		if latest != "" {
			c["lastTransitionTime"] = latest
		}
		out = append(out, c)
	}
	return out
}

// asInt returns v as an int64 when it is a JSON integer (int64, or a float64 without fraction
// as encoding/json decodes it).
func asInt(v interface{}) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true
		}
	}
	return 0, false
}

// ObservedGeneration returns the status.observedGeneration of the summary (docs/status.md,
// "observedGeneration only when every location has observed the source's generation"): the
// newest generation of the source that every location's target has observed. ok is false
// when some location reports none yet; the summary then has no observedGeneration.
//
// records maps a location to its status record, whose status.observedGeneration counts the
// generations of the location's view (pkg/mapper reports it so: a target copy carries the view
// generation it was applied from, contract.SourceGenerationAnnotation). viewGeneration returns
// the metadata.generation location's view of the current version shows (read through the view,
// at least as new as the version the records come from), and generation is the source's own.
//
//   - A location that reports the source's generation, or its view's current generation,
//     observed everything the current version shows it outside .status: whatever moved the
//     source's generation since is hidden from its view or in .status alone (kube-apiserver
//     bumps a Deployment's generation with every annotation change, so with every status
//     record written). It counts as having observed generation.
//   - Any other location observed the (older) source generation it reports.
//
// The result is the least of these, so it never claims a generation some location has not
// observed (kubectl rollout status trusts it). viewGeneration is called only for the
// locations that report less than generation; its error is returned.
func ObservedGeneration(locations []string, records map[string]map[string]interface{}, viewGeneration func(location string) (int64, error), generation int64) (observed int64, ok bool, err error) {
	if len(locations) == 0 {
		return 0, false, nil
	}
	for _, l := range locations {
		if _, ok := asInt(records[l]["observedGeneration"]); !ok {
			return 0, false, nil
		}
	}
	observed = generation
	for _, l := range locations {
		reported, _ := asInt(records[l]["observedGeneration"])
		if reported >= generation {
			continue
		}
		view, err := viewGeneration(l)
		if err != nil {
			return 0, false, err
		}
		if reported < view {
			observed = min(observed, reported)
		}
	}
	return observed, true, nil
}
