package view

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationevents"
)

// marksStorage writes `<resource>/<name>` itself through a location view onto the source, for
// the changes a location may make there: adding or removing its own finalizer (docs/views.md
// "Deletion"), and setting or removing its own apply outcome record outcome.kcp.io/<location>
// (markChangeOf; docs/mapper.md, "Outcome records"). It is rest.Getter and rest.Updater, so that k8s.io/apiserver's
// UpdateResource and PatchResource handlers (PUT, JSON/merge/strategic merge patches,
// server-side apply) compute the new object from the location's view of the current source
// object, as for status writes (statusStorage, whose cluster resolution, precondition and
// answer it shares):
//   - the object must be in the location's view: assigned to it (in the Bound mode, by a
//     namespace bound to the location: ResourceStore.Assignment), or carrying its finalizer
//     (else 404); adding the finalizer needs that assignment (else 409: the location is
//     leaving the object), so that a location never holds an object its view would not show
//     (the record of a location an object left is removed by mapper-controller, docs/status.md);
//   - an outcome record set must be one (contract.ParseOutcomeRecord, else 400) of at most
//     contract.MaxOutcomeRecordBytes (else 413);
//   - a resourceVersion in the request must be the source's current one or one since which
//     nothing this location can see changed (preconditionHolds), else 409;
//   - any other change than the location's own finalizer is refused with the 405 every other
//     write through a view gets, naming the part changed;
//   - the source write is one JSON merge patch (writeMarks) of the object as the cache holds it
//     (sourceCopy): the finalizer list with the finalizer appended or removed, the outcome
//     record set or removed, and the cached copy's metadata.resourceVersion, which
//     kube-apiserver takes as the write's precondition (409 when the object changed since),
//     so that a change of another writer the cache has not seen yet (another controller's
//     finalizer) is never overwritten. Every decision is made on the object the write applies
//     to: a write the cached copy would refuse, or find to change nothing, and a write the
//     source answers with 409, are decided again on the object read fresh from the source
//     (today's answer; a fresh read whose write loses a race is read again, maxWriteAttempts
//     in all), so that a stale cache answers no request; a write that changes nothing is not
//     sent. A mark write therefore costs the source one request (the PATCH) unless the cache
//     is behind the source or another writer came first.
type marksStorage struct {
	st *statusStorage
	// recorded, when not nil, is told of every outcome record written with a new reason
	// (Options.OutcomeRecorded).
	recorded func(locationevents.Outcome)
}

var (
	_ rest.Getter  = &marksStorage{}
	_ rest.Updater = &marksStorage{}
)

// New returns an empty object of the resource's kind.
func (m *marksStorage) New() runtime.Object { return m.st.New() }

// Destroy releases nothing.
func (m *marksStorage) Destroy() {}

// Get returns the location's view of the object from the cache, as a GET of the object does.
func (m *marksStorage) Get(ctx context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	return m.st.Get(ctx, name, opts)
}

// Update applies objInfo to the location's view of the current source object and writes the
// location's finalizer change to the source (see marksStorage). It returns the location's view
// of the written object. Errors: 404 when the object is not in the view, 405 for any other
// change, 400 and 413 for an outcome record that is not one or too large, 409 on a stale resourceVersion or when adding the finalizer of a location the object
// is no longer assigned to, the source's own error otherwise (422 when the source refuses a
// new finalizer on an object it is deleting).
func (m *marksStorage) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, _ rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, _ bool, _ *metav1.UpdateOptions) (runtime.Object, bool, error) {
	location, _ := LocationFrom(ctx)
	gr := m.st.info.GVR.GroupResource()
	cluster, client, err := m.st.writeTarget(ctx, location, name)
	if err != nil {
		observeMarkWrite(gr, markChange{}, err)
		return nil, false, err
	}
	// The first attempt works on the cache's copy of the source object (one source request);
	// the attempts after it on the object read fresh (see marksStorage).
	current := m.sourceCopy(cluster, genericapirequest.NamespaceValue(ctx), name)
	for attempt := 1; ; {
		result, change, retry, err := m.updateOnce(ctx, client, location, cluster, name, current, objInfo, updateValidation)
		if retry && current != nil {
			current = nil // decide again on the source's object
			continue
		}
		if err != nil && retry && attempt < maxWriteAttempts {
			attempt++
			continue
		}
		observeMarkWrite(gr, change, err)
		if err != nil {
			return nil, false, err
		}
		return result, false, nil
	}
}

// sourceCopy returns the cache's copy of the source object namespace/name of cluster
// (READ-ONLY: the stored object), or nil when the cache holds none.
func (m *marksStorage) sourceCopy(cluster, namespace, name string) *unstructured.Unstructured {
	item, ok, err := m.st.store.SourceStore().GetByKey(string(contract.NewKey(cluster, namespace, name)))
	if err != nil || !ok {
		return nil
	}
	u, _ := item.(*unstructured.Unstructured)
	return u
}

// updateOnce is one attempt of Update on current: the source object as the cache holds it
// (READ-ONLY), or read fresh from the source when current is nil. retry says that the attempt
// is to be made again on an object read fresh: it lost a race with another writer (409 from
// the source), or, on the cache's copy, it would answer anything but a write that took (an
// error, or no write to send).
func (m *marksStorage) updateOnce(ctx context.Context, client dynamic.ResourceInterface, location, cluster, name string, current *unstructured.Unstructured, objInfo rest.UpdatedObjectInfo, updateValidation rest.ValidateObjectUpdateFunc) (runtime.Object, markChange, bool, error) {
	gr := m.st.info.GVR.GroupResource()
	cached := current != nil
	// refuse answers err, decided before any write: on the cache's copy, an attempt on the
	// source's object decides instead.
	refuse := func(change markChange, err error) (runtime.Object, markChange, bool, error) {
		return nil, change, cached, err
	}
	if !cached {
		var err error
		current, err = client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, markChange{}, false, apierrors.NewNotFound(gr, name)
		}
		if err != nil {
			return nil, markChange{}, false, sourceError(err)
		}
	}
	// A malformed assignment assigns no location (docs/design.md, "Names"), nor does one to a
	// location not bound to the object's namespace (docs/tenancy.md).
	locations := m.st.store.Assignment(current, cluster)
	assigned := slices.Contains(locations, location)
	if !assigned && !slices.Contains(current.GetFinalizers(), contract.LocationFinalizer(location)) {
		return refuse(markChange{}, apierrors.NewNotFound(gr, name))
	}
	viewed := withClusterAnnotation(m.st.store.LocationView(current, cluster, locations, location), cluster)
	updated, err := objInfo.UpdatedObject(ctx, viewed)
	if err != nil {
		return refuse(markChange{}, err)
	}
	if updateValidation != nil {
		if err := updateValidation(ctx, updated, viewed); err != nil {
			return refuse(markChange{}, err)
		}
	}
	u, ok := updated.(*unstructured.Unstructured)
	if !ok {
		return nil, markChange{}, false, apierrors.NewInternalError(fmt.Errorf("unexpected object %T", updated))
	}
	if rv := u.GetResourceVersion(); rv != "" && !m.st.preconditionHolds(ctx, location, cluster, current, rv) {
		return refuse(markChange{}, apierrors.NewConflict(gr, name, errors.New("the object has been modified; please apply your changes to the latest version and try again")))
	}
	change, err := markChangeOf(viewed, u, location)
	if err != nil {
		return refuse(markChange{}, notOwnMarks(gr, name, err))
	}
	if err := checkOutcomeRecord(gr, name, location, change); err != nil {
		return refuse(change, err)
	}
	if change.finalizer > 0 && !assigned {
		return refuse(change, apierrors.NewConflict(gr, name, fmt.Errorf("the object is no longer assigned to location %q (or its namespace is not bound to it): its finalizer %s cannot be added", location, contract.LocationFinalizer(location))))
	}
	written := current
	if change.changes() {
		written, err = writeMarks(ctx, client, current, location, change)
		if err != nil {
			if apierrors.IsConflict(err) {
				return nil, change, true, apierrors.NewConflict(gr, name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
			}
			if apierrors.IsInvalid(err) {
				// The source's own validation: no new finalizer on an object it is deleting.
				return nil, change, false, err
			}
			return nil, change, false, sourceError(err)
		}
	} else if cached {
		return refuse(change, nil) // no write to send: the source's object decides
	}
	if change.outcome > 0 && m.recorded != nil && written != current {
		m.recordOutcome(current, cluster, location, change.outcomeRecord)
	}
	answer := withClusterAnnotation(m.st.store.LocationView(written, cluster, locations, location), cluster)
	m.st.answerResourceVersion(ctx, answer, current, written, location, cluster)
	return answer, change, false, nil
}

// recordOutcome tells m.recorded of outcome record, just written by location on before (the
// object as it was before the write, READ-ONLY), when its reason is not the reason of before's
// record of the location: a location that writes the same failure again (a new generation, a
// new message) makes no new Event.
func (m *marksStorage) recordOutcome(before *unstructured.Unstructured, cluster, location, record string) {
	now, err := contract.ParseOutcomeRecord(record)
	if err != nil {
		return // checkOutcomeRecord refused such a record before the write
	}
	if old, err := contract.ParseOutcomeRecord(before.GetAnnotations()[contract.OutcomeAnnotation(location)]); err == nil && old.Reason == now.Reason {
		return
	}
	m.recorded(locationevents.Outcome{
		Object: cache.PendingDeletion{GVR: m.st.info.GVR, Cluster: cluster, Namespace: before.GetNamespace(), Name: before.GetName(), UID: before.GetUID(), Location: location},
		Reason: now.Reason, Message: now.Message,
	})
}

// notOwnMarks is the 405 of a write of the object itself that changes more than the location's
// marks: the answer every other write through a view gets (readOnly), with the reason.
func notOwnMarks(gr schema.GroupResource, name string, err error) error {
	e := apierrors.NewMethodNotSupported(gr, "update")
	e.ErrStatus.Message = fmt.Sprintf("%s %q: %v; change the object in the source cluster instead", gr.String(), name, err)
	return e
}
