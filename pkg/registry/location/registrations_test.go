package location

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// TestRegistrationErrorsLoggedOncePerReason: a source without the SyncTarget CRD (404 on
// every retry) is logged once, an error with another reason again.
func TestRegistrationErrorsLoggedOncePerReason(t *testing.T) {
	var buf bytes.Buffer
	ctx := klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf))))
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }
	handle := logOncePerReason("SyncTargets", "synctargets.control.mapper.kcp.io")
	missing := apierrors.NewNotFound(schema.GroupResource{Group: "control.mapper.kcp.io", Resource: "synctargets"}, "")
	for i := 0; i < 5; i++ {
		handle(ctx, nil, missing)
	}
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], `reason="NotFound"`) {
		t.Fatalf("5 failures for a missing CRD logged %d lines, want 1 with reason NotFound: %q", len(l), l)
	}
	handle(ctx, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "synctargets"}, "", errors.New("no")))
	handle(ctx, nil, errors.New("dial tcp: connection refused"))
	if l := lines(); len(l) != 3 || !strings.Contains(l[1], "Forbidden") || !strings.Contains(l[2], "Unreachable") {
		t.Errorf("a new reason each time must be logged: %q", l)
	}
}
