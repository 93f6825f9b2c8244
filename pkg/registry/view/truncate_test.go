package view

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestStatusMessagesAreBounded for Status messages: a client-supplied value
// quoted in a 400 is truncated to a few hundred bytes.
func TestStatusMessagesAreBounded(t *testing.T) {
	huge := strings.Repeat("x", 200<<10)
	_, _, err := parseResourceVersion(huge, "")
	if !apierrors.IsBadRequest(err) {
		t.Fatalf("resourceVersion %.20s...: got %v, want 400", huge, err)
	}
	if n := len(err.Error()); n > 1024 {
		t.Fatalf("Status message of %d bytes for a 200 KB resourceVersion", n)
	}
	_, _, err = decodeContinue(huge)
	if !apierrors.IsBadRequest(err) {
		t.Fatalf("continue %.20s...: got %v, want 400", huge, err)
	}
	if n := len(err.Error()); n > 1024 {
		t.Fatalf("Status message of %d bytes for a 200 KB continue token", n)
	}
}
