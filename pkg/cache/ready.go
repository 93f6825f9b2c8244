package cache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// WaitUntilSynced is the gate every read of a location view passes before it reads the store,
// the counterpart of the cacher's ready state (k8s.io/apiserver/pkg/storage/cacher/ready.go):
// a resource whose first list from the source has not finished is never served as empty.
//
// It returns nil as soon as the store has synced. Otherwise it waits up to timeout (the view's
// freshness timeout) for the first sync, then answers:
//   - 503 ServiceUnavailable with Retry-After when the last attempt to list the resource did
//     not reach the source (connection refused, timeout: the source is unreachable);
//   - 429 TooManyRequests with Retry-After otherwise (still listing, or the source refused the
//     list, e.g. 403 because the server's RBAC does not cover the resource), as the cacher
//     answers before it is ready (KEP-4568, ResilientWatchCacheInitialization), with its
//     Retry-After rule (calculateRetryAfterForUnreadyCache: e^(0.06·seconds unready), 1-30 s).
//
// A store closed meanwhile (the resource left the source) is a 503; ctx ending is ctx.Err().
func (s *ResourceStore) WaitUntilSynced(ctx context.Context, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := s.waitUntil(wctx, func() bool { return s.synced || s.closed }); err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch {
	case s.closed:
		return s.closedError()
	case s.synced:
		return nil
	}
	retryAfter := retryAfterUnsynced(s.clock.Since(s.created))
	msg := fmt.Sprintf("%s is not synced with the source yet", s.gvr.GroupResource())
	if s.syncErr != nil {
		msg += ": " + contract.Truncate(s.syncErr.Error(), maxLoggedValue)
	}
	if s.syncErr != nil && sourceUnreachable(s.syncErr) {
		err := apierrors.NewServiceUnavailable(msg)
		err.ErrStatus.Details = &metav1.StatusDetails{Group: s.gvr.Group, Kind: s.gvr.Resource, RetryAfterSeconds: int32(retryAfter)}
		return err
	}
	return apierrors.NewTooManyRequests(msg, retryAfter)
}

// retryAfterUnsynced is the cacher's Retry-After for a cache that has not been ready for
// downtime: e^(0.06·seconds), at least 1 and at most 30 seconds.
func retryAfterUnsynced(downtime time.Duration) int {
	return int(math.Min(30, math.Max(1, math.Exp(0.06*downtime.Seconds()))))
}

// sourceUnreachable reports whether err (of a list or watch of the source) means the source
// was not reached at all, rather than answering with an error Status.
func sourceUnreachable(err error) bool {
	var status apierrors.APIStatus
	return !errors.As(err, &status)
}

// SyncError returns the error of the last failed attempt to list (or, before the first sync,
// to watch) the resource on the source, nil when the last attempt succeeded.
func (s *ResourceStore) SyncError() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.syncErr
}

// setSyncError records the outcome of a list (or initial watch) of the source: err, or nil for
// success. A change is logged and counted (mapper_apiserver_source_list_errors_total); a
// resource the source refuses to list is reported this way and blocks nothing else.
func (s *ResourceStore) setSyncError(err error) {
	s.mu.Lock()
	prev := s.syncErr
	s.syncErr = err
	s.mu.Unlock()
	if err == nil {
		if prev != nil {
			klog.InfoS("Listing the resource from the source works again", "resource", s.gvr.GroupResource().String())
		}
		return
	}
	reason := SyncErrorReason(err)
	s.metrics.listErrors(reason).Inc()
	if prev == nil || SyncErrorReason(prev) != reason {
		klog.ErrorS(nil, "Listing the resource from the source failed; its views answer 429/503 until it syncs, nothing else is blocked",
			"resource", s.gvr.GroupResource().String(), "reason", reason, "err", contract.Truncate(err.Error(), maxLoggedValue))
	}
}

// SyncErrorReason classifies a list error for the metric and for logging once per change: the
// Status reason (Forbidden, ...), Unreachable, or Unknown.
func SyncErrorReason(err error) string {
	if sourceUnreachable(err) {
		return "Unreachable"
	}
	if reason := string(apierrors.ReasonForError(err)); reason != "" {
		return reason
	}
	return "Unknown"
}
