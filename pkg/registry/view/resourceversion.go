package view

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// This file owns the resourceVersion semantics of views: parsing a request's resourceVersion and
// resourceVersionMatch into a read mode, waiting for the cache to reach a resourceVersion (one
// timeout, --freshness-timeout), proving a consistent read fresh, and the 410 and 504 answers,
// built with k8s.io/apiserver's and apimachinery's own errors. The store (pkg/cache) only
// reports what it holds: its resourceVersion, its history's oldest resumable resourceVersion
// (410 "too old resource version") and, as a backstop, a resume ahead of it (504).

// readMode says how a list or watch relates to the source's resourceVersion, following the
// resourceVersion / resourceVersionMatch table of the Kubernetes API concepts documentation.
type readMode int

const (
	// readConsistent: resourceVersion "" — the result must include every source write that
	// completed before the request.
	readConsistent readMode = iota
	// readAny: resourceVersion "0" — any cached state.
	readAny
	// readNotOlderThan: resourceVersion N (no match or NotOlderThan) — state at least as new as N.
	readNotOlderThan
	// readExact: resourceVersion N with resourceVersionMatch=Exact — state exactly at N.
	readExact
)

// parseResourceVersion turns a request's resourceVersion and resourceVersionMatch into a
// readMode and a number. It returns a 400 Status for a resourceVersion that is not a number.
func parseResourceVersion(rv string, match metav1.ResourceVersionMatch) (readMode, uint64, error) {
	switch rv {
	case "":
		return readConsistent, 0, nil
	case "0":
		if match == metav1.ResourceVersionMatchExact {
			return 0, 0, apierrors.NewBadRequest("resourceVersionMatch=Exact requires a resourceVersion other than 0")
		}
		return readAny, 0, nil
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: it must be a number the server returned", contract.Truncate(rv, maxQuoted)))
	}
	if match == metav1.ResourceVersionMatchExact {
		return readExact, n, nil
	}
	return readNotOlderThan, n, nil
}

// freshness waits for one resource's store to reach resourceVersions of the source.
type freshness struct {
	gvr    schema.GroupVersionResource
	store  Store
	source Source
	// timeout bounds a wait for a resourceVersion (--freshness-timeout).
	timeout time.Duration
	// consistentReadWait bounds how long a consistent read waits for the cache to prove it
	// caught up with the source (waitConsistent).
	consistentReadWait time.Duration
}

// waitFor waits until the cache has processed the source up to rv. After the freshness timeout it
// answers 504 "Too large resource version" with a retry hint, as kube-apiserver's watch cache does.
func (f freshness) waitFor(ctx context.Context, rv uint64) error {
	if f.store.ResourceVersion() >= rv {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := f.store.WaitForResourceVersion(wctx, rv); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return storage.NewTooLargeResourceVersionError(rv, f.store.ResourceVersion(), 1)
	}
	return nil
}

// waitRendered waits until the cache's rendering of one object for location is not pending
// (docs/views.md, "Deferred renderings"): a consistent GET shows the object as its newest
// version renders. Only renderings of the object's own namespace's Customizations can be
// pending, so a tenant's consistent GET waits for its own Customizations only. After the
// freshness timeout it answers 504 with a retry hint and a message that names the cause, as
// waitFor does for a cache that is behind.
func (f freshness) waitRendered(ctx context.Context, location, cluster, namespace, name string) error {
	wctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := f.store.WaitRendered(wctx, location, cluster, namespace, name); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return apierrors.NewTimeoutError(fmt.Sprintf("the rendering of %s %q for location %q by the Customizations of its namespace is still pending after %s",
			f.gvr.GroupResource(), name, location, f.timeout), 1)
	}
	return nil
}

// waitConsistent makes a read with resourceVersion "" include every source write that completed
// before it: it reads the source's current resourceVersion R (one coalesced limit=1 LIST) and
// waits until the cache has processed the source's events up to R.
//
// The cache's resourceVersion for a resource advances with that resource's events and with the
// source's bookmarks, and kube-apiserver sends a watcher bookmarks only about once a minute. So
// for a resource with no writes since R's predecessors the cache cannot prove it reached R
// before the wait (consistentReadWait) ends. In that case the read is served at the cache's own resourceVersion
// (the response's resourceVersion says which state it shows) and counted in
// mapper_apiserver_view_unproven_consistent_reads_total: every write whose watch event reached
// the server before the request is included. The source being unreachable is a 503.
func (f freshness) waitConsistent(ctx context.Context) error {
	want, err := f.source.ResourceVersion(ctx, f.gvr)
	if err != nil {
		return sourceError(err)
	}
	if f.store.ResourceVersion() >= want {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, f.consistentReadWait)
	defer cancel()
	if err := f.store.WaitForResourceVersion(wctx, want); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		unprovenConsistentReads.WithLabelValues(f.gvr.GroupResource().String()).Inc()
	}
	return nil
}

// exactTooOld is the 410 of a list with resourceVersionMatch=Exact at a resourceVersion whose
// state is no longer kept, with kube-apiserver's message (its etcd3 store's ErrCompacted answer).
func exactTooOld() error {
	return apierrors.NewResourceExpired("The resourceVersion for the provided list is too old.")
}
