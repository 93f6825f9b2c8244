package contract

import (
	"strings"
	"testing"
	"time"
)

func TestOutcomeRecordFitsAndRoundTrips(t *testing.T) {
	at := time.Date(2026, 11, 28, 16, 0, 0, 0, time.UTC)
	for _, msg := range []string{"", "short", strings.Repeat("x", 10000), strings.Repeat("\"<\u00e9>", 3000)} {
		r := NewOutcomeRecord(OutcomeRejected, msg, 7, at)
		v := r.Encode()
		if len(v) > MaxOutcomeRecordBytes {
			t.Fatalf("record of a %d-byte message is %d bytes, more than %d", len(msg), len(v), MaxOutcomeRecordBytes)
		}
		got, err := ParseOutcomeRecord(v)
		if err != nil {
			t.Fatal(err)
		}
		if !got.SameOutcome(r) || got.Time != "2026-11-28T16:00:00Z" {
			t.Fatalf("round trip = %+v, want %+v", got, r)
		}
		if len(msg) < 100 && got.Message != msg {
			t.Fatalf("a short message was changed: %q", got.Message)
		}
	}
}

func TestParseOutcomeRecordRefuses(t *testing.T) {
	for _, v := range []string{"", "null", "[]", `{"message":"m"}`, `{"reason":"Paused","extra":1}`, `{"reason":"Paused","message":"` + strings.Repeat("x", MaxOutcomeRecordBytes) + `"}`} {
		if _, err := ParseOutcomeRecord(v); err == nil {
			t.Errorf("ParseOutcomeRecord(%.40q) accepted it", v)
		}
	}
}

func TestSameOutcomeIgnoresTimeAndGeneration(t *testing.T) {
	a := NewOutcomeRecord(OutcomePaused, "m", 1, time.Unix(0, 0))
	b := NewOutcomeRecord(OutcomePaused, "m", 1, time.Unix(1000, 0))
	if !a.SameOutcome(b) {
		t.Error("records that differ in time only are not the same outcome")
	}
	if !a.SameOutcome(NewOutcomeRecord(OutcomePaused, "m", 2, time.Unix(0, 0))) {
		t.Error("records that differ in generation only are not the same outcome: writing one would move a Deployment's generation, and the record would be written again")
	}
	if a.SameOutcome(NewOutcomeRecord(OutcomePaused, "n", 1, time.Unix(0, 0))) || a.SameOutcome(NewOutcomeRecord(OutcomeConflict, "m", 1, time.Unix(0, 0))) {
		t.Error("records of different reasons or messages are the same outcome")
	}
}
