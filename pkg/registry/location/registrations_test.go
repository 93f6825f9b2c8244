package location

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
)

// TestRegistrationErrorsLoggedOncePerReason: a source without the SyncTarget CRD (404 on
// every retry) is logged once, an error with another reason again.
func TestRegistrationErrorsLoggedOncePerReason(t *testing.T) {
	var lines []string
	logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 0})
	ctx := klog.NewContext(context.Background(), logger)
	handle := logOncePerReason("SyncTargets", "synctargets.control.mapper.kcp.io")
	missing := apierrors.NewNotFound(schema.GroupResource{Group: "control.mapper.kcp.io", Resource: "synctargets"}, "")
	for i := 0; i < 5; i++ {
		handle(ctx, nil, missing)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"reason"="NotFound"`) {
		t.Fatalf("5 failures for a missing CRD logged %d lines, want 1 with reason NotFound: %q", len(lines), lines)
	}
	handle(ctx, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "synctargets"}, "", errors.New("no")))
	handle(ctx, nil, errors.New("dial tcp: connection refused"))
	if len(lines) != 3 || !strings.Contains(lines[1], "Forbidden") || !strings.Contains(lines[2], "Unreachable") {
		t.Errorf("a new reason each time must be logged: %q", lines)
	}
}
