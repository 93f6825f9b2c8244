package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The apply outcome record of a location (docs/design.md, "Names" and "Status records";
// docs/mapper.md, "Outcome records") is the JSON of an OutcomeRecord in the annotation
// outcome.kcp.io/<location> (OutcomeAnnotation) of a source object: why that location cannot
// apply the object. The location's mapper writes it through its view when the outcome
// changes and removes it once the object applies again; mapper-apiserver accepts that write
// from the location alone (its own record, at most MaxOutcomeRecordBytes) and shows a
// location's own record in its view and never another location's.

// Reasons of an OutcomeRecord: why a location does not apply an object.
const (
	// OutcomeRejected: the target refused the copy (its admission, validation, a quota); the
	// message is the target's answer.
	OutcomeRejected = "Rejected"
	// OutcomeConflict: an object the mapper does not manage holds the copy's place on the
	// target (its name, or its namespace).
	OutcomeConflict = "Conflict"
	// OutcomeResourceNotServed: the target does not serve the object's resource (its CRD is
	// missing): the mapper halts the resource until it does.
	OutcomeResourceNotServed = "ResourceNotServed"
	// OutcomeResourceHalted: the location's SyncTarget names the object's resource in
	// spec.haltedResources.
	OutcomeResourceHalted = "ResourceHalted"
	// OutcomePaused: the location's SyncTarget has spec.paused: true.
	OutcomePaused = "Paused"
	// OutcomeNamingFailed: the object's ResourceMapping names its copy (spec.naming), and the
	// naming cannot be evaluated for it: the copy has no place, nothing is written or deleted.
	OutcomeNamingFailed = "NamingFailed"
)

// OutcomeRecord is one location's apply outcome of a source object, the value of
// outcome.kcp.io/<location> (JSON).
type OutcomeRecord struct {
	// Reason is a CamelCase word, one of the Outcome* constants.
	Reason string `json:"reason"`
	// Message says why, for a person (truncated so that the record fits
	// MaxOutcomeRecordBytes).
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the metadata.generation of the location's view of the object
	// when the location first saw this outcome (0 when the object has none).
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Time is when the location first saw this outcome, RFC 3339 in UTC, to the second.
	Time string `json:"time"`
}

// SameOutcome reports whether r and o say the same: reason and message (their times and
// generations aside). A mapper writes a record only when it is not the same as the one the
// object carries, so a record keeps the generation and time at which its outcome was first
// seen. The generation must be left out: on kinds whose generation moves with their
// annotations (a Deployment's, k8s.io/kubernetes pkg/registry/apps/deployment/strategy.go)
// writing the record moves the generation, and a record rewritten for it would never settle.
func (r OutcomeRecord) SameOutcome(o OutcomeRecord) bool {
	return r.Reason == o.Reason && r.Message == o.Message
}

// NewOutcomeRecord returns the record of reason and message about generation at time at,
// with the message shortened (Truncate) so that the record's JSON is at most
// MaxOutcomeRecordBytes.
func NewOutcomeRecord(reason, message string, generation int64, at time.Time) OutcomeRecord {
	r := OutcomeRecord{Reason: reason, Message: message, ObservedGeneration: generation, Time: at.UTC().Format(time.RFC3339)}
	for budget := len(message); ; {
		b, _ := json.Marshal(r)
		if len(b) <= MaxOutcomeRecordBytes || budget == 0 {
			return r
		}
		// JSON escapes can make the encoding longer than the text: shrink by the excess and
		// the marker Truncate adds, until it fits.
		budget -= len(b) - MaxOutcomeRecordBytes + len("...(0000000000 more bytes)")
		if budget < 0 {
			budget = 0
		}
		r.Message = Truncate(message, budget)
	}
}

// Encode returns r as the annotation's value (JSON).
func (r OutcomeRecord) Encode() string {
	b, _ := json.Marshal(r) // strings and an integer: never fails
	return string(b)
}

// ParseOutcomeRecord decodes an outcome.kcp.io/<location> value. It returns an error when
// value is larger than MaxOutcomeRecordBytes, is not a JSON object of an OutcomeRecord, or
// has no reason.
func ParseOutcomeRecord(value string) (OutcomeRecord, error) {
	if len(value) > MaxOutcomeRecordBytes {
		return OutcomeRecord{}, fmt.Errorf("the outcome record is %d bytes, more than the limit of %d", len(value), MaxOutcomeRecordBytes)
	}
	var r OutcomeRecord
	d := json.NewDecoder(strings.NewReader(value))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return OutcomeRecord{}, fmt.Errorf("the outcome record is not a JSON object of reason, message, observedGeneration and time: %v", err)
	}
	if r.Reason == "" {
		return OutcomeRecord{}, errors.New("the outcome record has no reason")
	}
	return r, nil
}

// OutcomeRecordOf returns location's outcome record among a source object's annotations, and
// false when it has none or the one it has does not parse (ParseOutcomeRecord).
func OutcomeRecordOf(annotations map[string]string, location string) (OutcomeRecord, bool) {
	v, ok := annotations[OutcomeAnnotation(location)]
	if !ok {
		return OutcomeRecord{}, false
	}
	r, err := ParseOutcomeRecord(v)
	return r, err == nil
}

// OutcomeRecordLocations returns the locations that have an outcome record
// (outcome.kcp.io/<location>) among annotations, sorted.
func OutcomeRecordLocations(annotations map[string]string) []string {
	return recordLocations(annotations, OutcomeAnnotationPrefix)
}

// HasOutcomeRecords reports whether annotations hold an outcome record of any location; it
// allocates nothing.
func HasOutcomeRecords(annotations map[string]string) bool {
	return hasRecords(annotations, OutcomeAnnotationPrefix)
}
