package view

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestCheckStatusRecordSize: a status of at most contract.MaxStatusRecordBytes as JSON passes,
// one byte more is a 413 naming the location and the limit.
func TestCheckStatusRecordSize(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	// {"x":"<n a's>"} is n+8 bytes of JSON.
	status := func(jsonBytes int) interface{} {
		return map[string]interface{}{"x": strings.Repeat("a", jsonBytes-8)}
	}
	if err := checkStatusRecordSize(gr, "web", "east", status(contract.MaxStatusRecordBytes)); err != nil {
		t.Errorf("a status of exactly the limit: %v", err)
	}
	if err := checkStatusRecordSize(gr, "web", "east", nil); err != nil {
		t.Errorf("no status: %v", err)
	}
	err := checkStatusRecordSize(gr, "web", "east", status(contract.MaxStatusRecordBytes+1))
	if !apierrors.IsRequestEntityTooLargeError(err) {
		t.Fatalf("a status one byte over the limit: want 413, got %v", err)
	}
	for _, want := range []string{`"east"`, "32768", "32769"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the 413 does not say %s: %v", want, err)
		}
	}
}
