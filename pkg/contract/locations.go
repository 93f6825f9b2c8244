package contract

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// MaxLocationsPerObject is the largest number of entries ParseLocations accepts in one
	// annotation. It bounds the per-event fan-out work of a single object; an annotation with
	// more entries is malformed (the object is then assigned to no location).
	MaxLocationsPerObject = 1000
)

// ParseLocations parses a kcp.io/assigned-locations annotation value.
//
// It returns the location names sorted and de-duplicated, or an error that says what is
// wrong: the value is not JSON, not a JSON array, has an entry that is not a string or not a
// DNS-1123 label (docs/design.md: a location name is a DNS-1123 label), is an empty array, or has
// more than MaxLocationsPerObject entries. It never panics.
func ParseLocations(value string) ([]string, error) {
	if out, ok := parseCompactLocations(value); ok {
		return out, nil
	}
	return parseLocationsJSON(value)
}

// parseCompactLocations parses value when it is a compact JSON array of valid location names,
// such as ["east","west"], the form every writer of the annotation uses (json.Marshal of the
// names): ok is false for any other text, which parseLocationsJSON then reads. A location name is
// a DNS-1123 label, which has no character a JSON string escapes, so for the text it accepts
// this is exactly what parseLocationsJSON returns, without the garbage of encoding/json (a
// decoder state and a boxed interface per entry) for each of the cache's objects.
func parseCompactLocations(value string) (out []string, ok bool) {
	inner, ok := strings.CutPrefix(value, `["`)
	if !ok {
		return nil, false
	}
	if inner, ok = strings.CutSuffix(inner, `"]`); !ok {
		return nil, false
	}
	n := strings.Count(inner, `","`) + 1
	if n > MaxLocationsPerObject {
		return nil, false
	}
	out = make([]string, 0, n)
	for more := true; more; {
		var name string
		name, inner, more = strings.Cut(inner, `","`)
		if len(validation.IsDNS1123Label(name)) > 0 {
			return nil, false
		}
		out = append(out, name)
	}
	if !sort.StringsAreSorted(out) {
		sort.Strings(out)
	}
	return dedupSorted(out), true
}

// parseLocationsJSON is ParseLocations for any text: decoded with encoding/json, with an error
// that says what is wrong.
func parseLocationsJSON(value string) ([]string, error) {
	var raw interface{}
	if err := json.Unmarshal([]byte(value), &raw); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	entries, ok := raw.([]interface{})
	if !ok {
		return nil, fmt.Errorf("not a JSON array of location names (got %s)", jsonKind(raw))
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("empty array: name at least one location, or remove the annotation")
	}
	if len(entries) > MaxLocationsPerObject {
		return nil, fmt.Errorf("too many locations: %d entries, at most %d allowed", len(entries), MaxLocationsPerObject)
	}
	out := make([]string, 0, len(entries))
	for i, e := range entries {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("entry %d is not a string (got %s)", i, jsonKind(e))
		}
		if err := ValidateLocationName(s); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return dedupSorted(out), nil
}

// dedupSorted removes adjacent duplicates from a sorted slice, in place.
func dedupSorted(s []string) []string {
	if len(s) < 2 {
		return s
	}
	j := 1
	for i := 1; i < len(s); i++ {
		if s[i] != s[j-1] {
			s[j] = s[i]
			j++
		}
	}
	return s[:j]
}

// jsonKind names the JSON type of a value decoded by encoding/json into interface{}.
func jsonKind(v interface{}) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []interface{}:
		return "an array"
	case map[string]interface{}:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// HasLocation reports whether the sorted slice locs (as ParseLocations returns it) contains loc.
func HasLocation(locs []string, loc string) bool {
	i := sort.SearchStrings(locs, loc)
	return i < len(locs) && locs[i] == loc
}

// ValidateLocationName returns an error saying why name is not a location name, or nil.
// docs/design.md ("Names"): a location name is a DNS-1123 label (lowercase alphanumerics and "-", at
// most 63 characters). A long name is shortened in the message (see Truncate).
func ValidateLocationName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("%q is not a valid location name: %s", Truncate(name, maxQuoted), strings.Join(errs, "; "))
	}
	return nil
}
