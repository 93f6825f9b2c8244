package contract

import (
	"errors"
	"sort"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// The status record of a location (docs/design.md, "Status records"; docs/status.md) is the
// JSON of the .status the location's mapper wrote back through its view, kept in the
// annotation status.kcp.io/<location> (StatusRecordAnnotation) of a source object assigned to
// several locations. mapper-apiserver writes it; its views show a location's own record as
// .status and never another location's; mapper-controller folds records into .status,
// summarizes them and removes those of locations the object left; StatusCollectors read them.
// All of them read it with StatusRecord.

// StatusRecord returns location's status record among the annotations of a source object:
// the JSON object of status.kcp.io/<location> decoded as apimachinery's JSON decoder decodes an
// unstructured object (whole numbers are int64, others float64), so that it compares equal to
// the same .status read from the API server; whether there is such an annotation; and an error
// when its value is not a JSON object (ok is then true: a record exists but is unusable;
// callers treat it as no record).
func StatusRecord(annotations map[string]string, location string) (status map[string]interface{}, ok bool, err error) {
	raw, ok := annotations[StatusRecordAnnotation(location)]
	if !ok {
		return nil, false, nil
	}
	if err := utiljson.Unmarshal([]byte(raw), &status); err != nil {
		return nil, true, err
	}
	if status == nil {
		return nil, true, errNullStatusRecord
	}
	return status, true, nil
}

// errNullStatusRecord is StatusRecord's error for the record null.
var errNullStatusRecord = errors.New("the status record is null, not a JSON object")

// StatusRecordLocations returns the locations that have a status record (status.kcp.io/<location>)
// among annotations, sorted.
func StatusRecordLocations(annotations map[string]string) []string {
	return recordLocations(annotations, StatusRecordAnnotationPrefix)
}

// HasStatusRecords reports whether annotations hold a status record of any location; it
// allocates nothing.
func HasStatusRecords(annotations map[string]string) bool {
	return hasRecords(annotations, StatusRecordAnnotationPrefix)
}

// recordLocations returns the names after prefix of the annotations whose keys have it (the
// locations of a kind of per-location record), sorted.
func recordLocations(annotations map[string]string, prefix string) []string {
	var out []string
	for k := range annotations {
		if loc, ok := strings.CutPrefix(k, prefix); ok {
			out = append(out, loc)
		}
	}
	sort.Strings(out)
	return out
}

// hasRecords reports whether a key of annotations has prefix; it allocates nothing.
func hasRecords(annotations map[string]string, prefix string) bool {
	for k := range annotations {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}
