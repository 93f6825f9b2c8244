package view

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// maxWriteAttempts bounds how often a status write is re-applied to a fresh source object
// after losing a race with another writer (each attempt checks the request's resourceVersion
// precondition again, see preconditionHolds).
const maxWriteAttempts = 5

// statusStorage writes `<resource>/<name>/status` through a location view onto the source
// (docs/design.md): rest.Getter and rest.Updater, so that
// k8s.io/apiserver's UpdateResource and PatchResource handlers (PUT, JSON/merge/strategic merge
// patches, server-side apply) compute the new object from the location's view of the current
// source object, and this storage writes only its .status to the source:
//   - the object must be assigned to the location (else 404) and opted in with
//     kcp.io/status-policy: Reflect (else 403 naming the annotation);
//   - a resourceVersion in the request must be the source's current one, or one since which
//     nothing this location can see changed (the view shows the location's visible
//     resourceVersion, see preconditionHolds), else 409; the source write carries the source's
//     current resourceVersion as precondition, so a write never clobbers a change the client
//     could have seen. A source write that loses a race with another writer is made again on
//     a fresh read, whose precondition check decides (so status writes of other locations,
//     invisible here, cause no conflicts);
//   - assigned to this location only: the status becomes the source's .status (through the
//     source's /status subresource, or the main resource when it has none);
//   - assigned to several: it is kept in the annotation status.kcp.io/<location> (written
//     through the main resource: kube-apiserver drops metadata changes made through /status),
//     and also becomes .status when kcp.io/status-location names this location.
//
// The source object is read fresh from the source for every write (not from the cache), so
// the assignment and opt-in checks are made on the state the write applies to.
//
// The write goes to the object's logical cluster (Source.ClusterResource): the
// cluster of a per-cluster view path, else the only cluster whose object the view holds under
// namespace/name (400 when several do, see clusters.find).
type statusStorage struct {
	info     source.ResourceInfo
	store    Store
	source   Source
	clusters clusters
	// freshness waits for the cache to reach the source object just read (visibleView).
	freshness freshness
}

var (
	_ rest.Getter  = &statusStorage{}
	_ rest.Updater = &statusStorage{}
)

// New returns an empty object of the resource's kind.
func (s *statusStorage) New() runtime.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(s.info.GVK())
	return u
}

// Destroy releases nothing.
func (s *statusStorage) Destroy() {}

// Get returns the location's view of the object from the cache, as a GET of the object does.
func (s *statusStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	location, _ := LocationFrom(ctx)
	return s.clusters.find(ctx, s.store, s.info.GVR.GroupResource(), location, genericapirequest.NamespaceValue(ctx), name)
}

// Update applies objInfo to the location's view of the current source object and writes the
// resulting .status to the source (see statusStorage). It returns the location's view of the
// written object. Errors: 404 when the object is absent or assigned elsewhere, 403 without the
// opt-in, 409 on a stale resourceVersion, the source's own error (e.g. 422) otherwise.
func (s *statusStorage) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, _ rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	location, _ := LocationFrom(ctx)
	cluster, client, err := s.writeTarget(ctx, location, name)
	if err != nil {
		return nil, false, err
	}
	fieldValidation := ""
	if options != nil {
		fieldValidation = options.FieldValidation
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		result, retry, err := s.updateOnce(ctx, client, location, cluster, name, objInfo, updateValidation, fieldValidation)
		if err != nil && retry && attempt < maxWriteAttempts {
			continue
		}
		observeStatusWrite(s.info.GVR.GroupResource(), err, time.Since(start))
		if err != nil {
			return nil, false, err
		}
		return result, false, nil
	}
}

// writeTarget returns the logical cluster of the object name that a write through location's
// view goes to (the request's cluster path, else the only cluster whose object the view holds
// under namespace/name: 400 when several do, see clusters.find) and the source's client of
// the resource in that cluster and the request's namespace. Errors: 404 when the view holds no
// such object, on a plain source for another cluster than its own, or when the object is
// outside the part of the location the request's path selects (PartFrom).
func (s *statusStorage) writeTarget(ctx context.Context, location, name string) (string, dynamic.ResourceInterface, error) {
	namespace := genericapirequest.NamespaceValue(ctx)
	cluster := s.clusters.requestCluster(ctx)
	if cluster == "" {
		obj, err := s.clusters.find(ctx, s.store, s.info.GVR.GroupResource(), location, namespace, name)
		if err != nil {
			return "", nil, err
		}
		cluster = obj.Cluster()
	}
	if s.clusters.plain != "" && cluster != s.clusters.plain {
		return "", nil, apierrors.NewNotFound(s.info.GVR.GroupResource(), name) // a plain source has no other cluster
	}
	if !PartFrom(ctx).Contains(cluster, namespace) {
		// A write through a part's path (a shard's) stays inside the part, as its reads do.
		return "", nil, apierrors.NewNotFound(s.info.GVR.GroupResource(), name)
	}
	client, err := s.source.ClusterResource(s.info.GVR, cluster, namespace)
	if err != nil {
		return "", nil, sourceError(err)
	}
	return cluster, client, nil
}

// updateOnce is one attempt of Update; retry says that it lost a race with another writer, so
// applying it again to a fresh object (checking the request's precondition again) is correct.
//
// fieldValidation is the request's (Strict, Warn, Ignore or ""); every source write carries it,
// so the source validates the status against its schema as kube-apiserver validates a status
// write made to it directly (Strict: 400 with the strict decoding error).
func (s *statusStorage) updateOnce(ctx context.Context, client dynamic.ResourceInterface, location, cluster, name string, objInfo rest.UpdatedObjectInfo, updateValidation rest.ValidateObjectUpdateFunc, fieldValidation string) (runtime.Object, bool, error) {
	gr := s.info.GVR.GroupResource()
	current, err := client.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, apierrors.NewNotFound(gr, name)
	}
	if err != nil {
		return nil, false, sourceError(err)
	}
	locations := s.store.Assignment(current, cluster) // bound locations only (docs/tenancy.md)
	if !slices.Contains(locations, location) {
		return nil, false, apierrors.NewNotFound(gr, name)
	}
	if !contract.ReflectsStatus(current.GetAnnotations()) {
		return nil, false, apierrors.NewForbidden(gr, name, fmt.Errorf("status write-back is not enabled for this object: set the annotation %s: %s on the source object to let locations write its status", contract.StatusPolicyAnnotation, contract.StatusPolicyReflect))
	}
	viewed := withClusterAnnotation(s.store.LocationView(current, cluster, locations, location), cluster)
	updated, err := objInfo.UpdatedObject(ctx, viewed)
	if err != nil {
		return nil, false, err
	}
	if updateValidation != nil {
		if err := updateValidation(ctx, updated, viewed); err != nil {
			return nil, false, err
		}
	}
	u, ok := updated.(*unstructured.Unstructured)
	if !ok {
		return nil, false, apierrors.NewInternalError(fmt.Errorf("unexpected object %T", updated))
	}
	if rv := u.GetResourceVersion(); rv != "" && !s.preconditionHolds(ctx, location, cluster, current, rv) {
		return nil, false, apierrors.NewConflict(gr, name, fmt.Errorf("%s", "the object has been modified; please apply your changes to the latest version and try again"))
	}
	status, hasStatus := u.Object["status"]
	if err := checkStatusRecordSize(gr, name, location, status); err != nil {
		return nil, false, err
	}
	written, err := s.write(ctx, client, current, locations, location, status, hasStatus, fieldValidation)
	if err != nil {
		if apierrors.IsConflict(err) {
			return nil, true, apierrors.NewConflict(gr, name, fmt.Errorf("%s", "the object has been modified; please apply your changes to the latest version and try again"))
		}
		if _, ok := err.(apierrors.APIStatus); ok {
			return nil, false, strictPatchError(ctx, err, status)
		}
		return nil, false, sourceError(err)
	}
	answer := withClusterAnnotation(s.store.LocationView(written, cluster, locations, location), cluster)
	s.answerResourceVersion(ctx, answer, current, written, location, cluster)
	return answer, false, nil
}

// withClusterAnnotation sets kcp.io/cluster on u, a copy the caller owns, as a view shows every object
// (docs/design.md, "Names").
func withClusterAnnotation(u *unstructured.Unstructured, cluster string) *unstructured.Unstructured {
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[contract.ClusterAnnotation] = cluster
	u.SetAnnotations(ann)
	return u
}

// checkStatusRecordSize refuses a status whose JSON (the status record of location,
// status.kcp.io/<location>, when the object has several locations) is larger than
// contract.MaxStatusRecordBytes: 413 RequestEntityTooLarge with a Status that names the limit,
// the size and the location (docs/design.md, "Status records": no location may use up the object's
// 256 KiB annotation budget and block its peers). The cap holds for every status write, also of
// an object assigned to this location alone, whose status would become a record as soon as a
// second location is assigned. Nothing is written to the source.
func checkStatusRecordSize(gr schema.GroupResource, name, location string, status interface{}) error {
	record, err := json.Marshal(status)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("status is not JSON: %v", err))
	}
	if len(record) <= contract.MaxStatusRecordBytes {
		return nil
	}
	e := apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
		"the status of %s %q written by location %q is %d bytes as JSON; a location's status record (%s%s) may hold at most %d bytes (32 KiB), so that one location cannot use up the object's annotation budget of its peers; write a smaller status",
		gr.String(), name, location, len(record), contract.StatusRecordAnnotationPrefix, location, contract.MaxStatusRecordBytes))
	e.ErrStatus.Details = &metav1.StatusDetails{Group: gr.Group, Kind: gr.Resource, Name: name}
	return e
}

// write stores status on the source object current (see statusStorage for the rules), each
// write with current's resourceVersion (or the previous write's) as precondition and with
// fieldValidation. The source's warnings (unknown fields, with Warn) become the answer's
// (source.RelayWarnings). A status kept only as a record (an annotation, whose content the
// source does not validate) is first written as .status in a dry run when fieldValidation is
// Strict (an unknown field fails the write, as on kube-apiserver) or Warn (the dry run's
// warnings are the answer's, and the record keeps the status the dry run would have stored:
// without the unknown fields, as kube-apiserver drops them). Without fieldValidation (the
// source's default, Warn) a record is written as sent, to spare a request per write.
func (s *statusStorage) write(ctx context.Context, client dynamic.ResourceInterface, current *unstructured.Unstructured, locations []string, location string, status interface{}, hasStatus bool, fieldValidation string) (*unstructured.Unstructured, error) {
	ctx = source.RelayWarnings(ctx)
	setStatus := func(u *unstructured.Unstructured) {
		if hasStatus {
			u.Object["status"] = status
		} else {
			delete(u.Object, "status")
		}
	}
	opts := metav1.UpdateOptions{FieldManager: fieldManager, FieldValidation: fieldValidation}
	writeStatus := func(target *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
		if !s.info.HasStatus {
			return client.Update(ctx, target, opts)
		}
		return client.UpdateStatus(ctx, target, opts)
	}
	if len(locations) > 1 {
		if (fieldValidation == metav1.FieldValidationStrict || fieldValidation == metav1.FieldValidationWarn) && hasStatus {
			probe := current.DeepCopy()
			setStatus(probe)
			dry := opts
			dry.DryRun = []string{metav1.DryRunAll}
			checked, err := writeStatus(probe, dry)
			if err != nil {
				return nil, err
			}
			if st, ok := checked.Object["status"]; ok {
				status = st
			}
		}
		record, err := json.Marshal(status)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("status is not JSON: %v", err))
		}
		target := current.DeepCopy()
		ann := target.GetAnnotations()
		if hasStatus {
			ann[contract.StatusRecordAnnotationPrefix+location] = string(record)
		} else {
			delete(ann, contract.StatusRecordAnnotationPrefix+location)
		}
		target.SetAnnotations(ann)
		fillsStatus := current.GetAnnotations()[contract.StatusLocationAnnotation] == location
		if fillsStatus && !s.info.HasStatus {
			setStatus(target) // one write: without a status subresource .status is in the main resource
			return client.Update(ctx, target, opts)
		}
		written, err := client.Update(ctx, target, opts)
		if err != nil || !fillsStatus {
			return written, err
		}
		current = written
	}
	target := current.DeepCopy()
	setStatus(target)
	return writeStatus(target, opts)
}

// fieldManager names mapper-apiserver's writes on the source.
const fieldManager = "mapper-apiserver"
