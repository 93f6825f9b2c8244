package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// objectWrites is the storage of writes of an object itself through a location view (not of
// its /status): create, update, patch (JSON, merge, strategic merge, server-side apply) and
// delete. Two kinds of write are accepted (docs/views.md, "Writes"):
//   - a related copy of the location (isRelatedCopyOf: the source object, or for a create the
//     new object, carries related.kcp.io/location=<location>) may be created, updated and
//     deleted under the rules of relatedRules.check (create, update) and below;
//   - on every other object, the location's own marks only (marksStorage: its finalizer and
//     outcome record), answered exactly as before related copies existed.
//
// Every other write is refused: a create of an object without the label is 405 (readOnly), one
// with another location's label 403; an update of an object that is not the location's related
// copy is marksStorage's (404 outside the view, 405 for a change beyond the marks); a delete of
// an object of the view that is not the location's related copy 405, of one outside the view
// 404 (a view never tells another location's objects from absent ones).
//
// The source writes go through the server's own source clients (Source.ClusterResource), as
// status and mark writes do, each one request with a precondition:
//   - create: the object as asked, without metadata.managedFields, metadata.resourceVersion and
//     kcp.io/cluster (which views add); the source's 409 AlreadyExists when the name is taken,
//     whoever holds it, and nothing changes;
//   - update and patch: one JSON merge patch of the source object, the difference between the
//     location's view of it and the object asked for (leaving out metadata.resourceVersion,
//     generation, managedFields and kcp.io/cluster), carrying the source object's
//     metadata.resourceVersion as precondition: what the view does not show is never written;
//     the three labels cannot change (403);
//   - delete: with the source object's uid and resourceVersion as preconditions; the main
//     object need not be assigned any more (a mapper cleans up after an unassignment), only
//     the label must name the location.
//
// As for mark writes, the first attempt is decided on the cache's copy of the source object and
// a write that copy would refuse, or that the source answers 409, is decided again on the
// object read fresh (up to maxWriteAttempts), so that a cache behind the source answers no
// request.
type objectWrites struct {
	marks *marksStorage
	rules relatedRules
}

var (
	_ rest.Getter          = &objectWrites{}
	_ rest.Updater         = &objectWrites{}
	_ rest.Creater         = &objectWrites{}
	_ rest.GracefulDeleter = &objectWrites{}
)

// New returns an empty object of the resource's kind.
func (w *objectWrites) New() runtime.Object { return w.marks.New() }

// Destroy releases nothing.
func (w *objectWrites) Destroy() {}

// Get returns the location's view of the object from the cache, as a GET of the object does.
func (w *objectWrites) Get(ctx context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	return w.marks.Get(ctx, name, opts)
}

// Create creates obj in the source when it is a related copy of the request's location that
// relatedRules.check accepts, and returns the location's view of the created object. Errors:
// 405 for an object without related.kcp.io/location (as every create through a view before),
// 403 for another location's label or a rule that does not hold, 400 on a kcp source's
// all-clusters path (a create names its cluster: <view>/clusters/<cluster>/...), the source's
// 409 when the name is taken, its 400 and 422 for an object it refuses.
func (w *objectWrites) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	result, err := w.create(ctx, obj, createValidation, options)
	observeRelatedWrite(w.gr(), "create", err)
	return result, err
}

func (w *objectWrites) create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	location, _ := LocationFrom(ctx)
	st := w.marks.st
	gr := w.gr()
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("unexpected object %T", obj))
	}
	if _, has := u.GetLabels()[contract.RelatedLocationLabel]; !has {
		return nil, readOnly(gr, "create", location)
	}
	name := u.GetName()
	if name == "" {
		name = u.GetGenerateName()
	}
	if !isRelatedCopyOf(u, location) {
		return nil, apierrors.NewForbidden(gr, name, fmt.Errorf("a location creates only its own related copies through its view: the label %s must be %q", contract.RelatedLocationLabel, location))
	}
	if !st.info.Namespaced {
		return nil, apierrors.NewForbidden(gr, name, fmt.Errorf("related copies are namespaced objects; %s is cluster-scoped", gr))
	}
	namespace := genericapirequest.NamespaceValue(ctx)
	cluster := st.clusters.requestCluster(ctx)
	switch {
	case cluster == "":
		return nil, apierrors.NewBadRequest(fmt.Sprintf("a related copy is created in one logical cluster: create it through %s/...", contract.ViewPath(location, "<cluster>")))
	case st.clusters.plain != "" && cluster != st.clusters.plain:
		return nil, apierrors.NewForbidden(gr, name, fmt.Errorf("the source has one logical cluster, %q", st.clusters.plain))
	case !PartFrom(ctx).Contains(cluster, namespace):
		return nil, apierrors.NewForbidden(gr, name, fmt.Errorf("namespace %q of cluster %q is outside the part of the view this path serves", namespace, cluster))
	}
	if createValidation != nil {
		if err := createValidation(ctx, u); err != nil {
			return nil, err
		}
	}
	if err := w.rules.check(ctx, location, cluster, namespace, u); err != nil {
		return nil, err
	}
	client, err := st.source.ClusterResource(st.info.GVR, cluster, namespace)
	if err != nil {
		return nil, sourceError(err)
	}
	out := u.DeepCopy()
	unstructured.RemoveNestedField(out.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(out.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(out.Object, "metadata", "annotations", contract.ClusterAnnotation)
	written, err := client.Create(ctx, out, metav1.CreateOptions{FieldManager: fieldManager, DryRun: options.DryRun, FieldValidation: options.FieldValidation})
	if err != nil {
		return nil, relatedWriteError(err)
	}
	return withClusterAnnotation(st.store.LocationView(written, cluster, st.store.Assignment(written, cluster), location), cluster), nil
}

// Update writes the object name: as a related copy of the request's location when the source
// object is one (updateCopy), else as a write of the location's marks (marksStorage.Update,
// today's answer). A server-side apply of an object that does not exist (forceAllowCreate) is
// 405 when the applied object carries related.kcp.io/location (applyCreate). It returns the
// location's view of the written object. Errors: those of
// marksStorage.Update and Create; for a related copy 403 when a rule does not hold or the
// update changes one of its three labels, 409 on a stale resourceVersion, the source's 400 and
// 422 for an object it refuses.
func (w *objectWrites) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	location, _ := LocationFrom(ctx)
	st := w.marks.st
	marks := func() (runtime.Object, bool, error) {
		return w.marks.Update(ctx, name, objInfo, createValidation, updateValidation, forceAllowCreate, options)
	}
	cluster, client, err := st.writeTarget(ctx, location, name)
	if err != nil {
		return marks() // not in the view (404) or ambiguous (400): marksStorage's answer
	}
	namespace := genericapirequest.NamespaceValue(ctx)
	current := w.marks.sourceCopy(cluster, namespace, name)
	cached := current != nil
	for attempt := 1; ; {
		if current == nil {
			current, err = client.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && forceAllowCreate {
				return w.applyCreate(ctx, name, objInfo, marks)
			}
			if err != nil {
				return marks()
			}
		}
		if !isRelatedCopyOf(current, location) {
			return marks()
		}
		result, retry, err := w.updateCopy(ctx, client, location, cluster, current, cached, objInfo, updateValidation, options)
		if retry && cached {
			current, cached = nil, false // decide again on the source's object
			continue
		}
		if err != nil && retry && attempt < maxWriteAttempts {
			current = nil
			attempt++
			continue
		}
		observeRelatedWrite(w.gr(), "update", err)
		if err != nil {
			return nil, false, err
		}
		return result, false, nil
	}
}

// applyCreate is a server-side apply of name, which does not exist. An applied object that
// carries related.kcp.io/location is refused with 405: a related copy is created by a create
// (POST), which the outer request's authorization names as such (verb create of
// locations/proxy), while an apply is authorized as a patch. Otherwise the answer is marks'
// (404), as before related copies.
func (w *objectWrites) applyCreate(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, marks func() (runtime.Object, bool, error)) (runtime.Object, bool, error) {
	// An object without a uid: the apply patcher creates the object from the configuration.
	obj, err := objInfo.UpdatedObject(ctx, w.New())
	if err != nil {
		return nil, false, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false, apierrors.NewInternalError(fmt.Errorf("unexpected object %T", obj))
	}
	if _, has := u.GetLabels()[contract.RelatedLocationLabel]; !has {
		return marks()
	}
	location, _ := LocationFrom(ctx)
	err = apierrors.NewMethodNotSupported(w.gr(), "apply")
	err.(*apierrors.StatusError).ErrStatus.Message = fmt.Sprintf("%s %q does not exist: a related copy is created through the view of location %q with a create (POST); server-side apply updates one that exists", w.gr(), name, location)
	observeRelatedWrite(w.gr(), "create", err)
	return nil, false, err
}

// updateCopy is one attempt of an update of current, a related copy of location (the source
// object as the cache holds it, READ-ONLY, when cached; else as just read from the source).
// retry says that the attempt is to be made again on an object read fresh: it lost a race with
// another writer (409 from the source), or, on the cache's copy, it would answer anything but
// a write that took.
func (w *objectWrites) updateCopy(ctx context.Context, client dynamic.ResourceInterface, location, cluster string, current *unstructured.Unstructured, cached bool, objInfo rest.UpdatedObjectInfo, updateValidation rest.ValidateObjectUpdateFunc, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	st := w.marks.st
	gr := w.gr()
	name := current.GetName()
	refuse := func(err error) (runtime.Object, bool, error) { return nil, cached, err }
	locations := st.store.Assignment(current, cluster)
	viewed := withClusterAnnotation(st.store.LocationView(current, cluster, locations, location), cluster)
	updated, err := objInfo.UpdatedObject(ctx, viewed)
	if err != nil {
		return refuse(err)
	}
	if updateValidation != nil {
		if err := updateValidation(ctx, updated, viewed); err != nil {
			return refuse(err)
		}
	}
	u, ok := updated.(*unstructured.Unstructured)
	if !ok {
		return nil, false, apierrors.NewInternalError(fmt.Errorf("unexpected object %T", updated))
	}
	if rv := u.GetResourceVersion(); rv != "" && !st.preconditionHolds(ctx, location, cluster, current, rv) {
		return refuse(apierrors.NewConflict(gr, name, errors.New("the object has been modified; please apply your changes to the latest version and try again")))
	}
	if was, is := relatedMarksOf(viewed), relatedMarksOf(u); was.location != is.location || was.ownerUID != is.ownerUID || was.identifier != is.identifier {
		return refuse(apierrors.NewForbidden(gr, name, fmt.Errorf("an update of a related copy through the view of location %q cannot change its labels %s, %s and %s",
			location, contract.RelatedLocationLabel, contract.RelatedOwnerUIDLabel, contract.RelatedIdentifierLabel)))
	}
	if err := w.rules.check(ctx, location, cluster, current.GetNamespace(), u); err != nil {
		return refuse(err)
	}
	patch, err := relatedPatch(viewed, u, current.GetResourceVersion())
	if err != nil {
		return nil, false, apierrors.NewInternalError(err)
	}
	written := current
	switch {
	case patch != nil:
		written, err = client.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager, DryRun: options.DryRun, FieldValidation: options.FieldValidation})
		if apierrors.IsConflict(err) {
			return nil, true, apierrors.NewConflict(gr, name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		if err != nil {
			return nil, false, relatedWriteError(err)
		}
	case cached:
		return refuse(nil) // no write to send: the source's object decides
	}
	answer := withClusterAnnotation(st.store.LocationView(written, cluster, st.store.Assignment(written, cluster), location), cluster)
	st.answerResourceVersion(ctx, answer, current, written, location, cluster)
	return answer, false, nil
}

// relatedPatch returns the JSON merge patch that makes of the source object what the update
// from viewed (the location's view of it) to updated asks for, with resourceVersion (the source
// object's) as its precondition; nil when the update changes nothing. What a client cannot set
// on a view's object is left out of the comparison: metadata.resourceVersion (the
// precondition), metadata.generation (a view may show an older one), metadata.managedFields
// (the view's field manager fills them) and the kcp.io/cluster annotation (views add it).
func relatedPatch(viewed, updated *unstructured.Unstructured, resourceVersion string) ([]byte, error) {
	comparable := func(u *unstructured.Unstructured) ([]byte, error) {
		c := u.DeepCopy()
		for _, f := range []string{"resourceVersion", "generation", "managedFields"} {
			unstructured.RemoveNestedField(c.Object, "metadata", f)
		}
		unstructured.RemoveNestedField(c.Object, "metadata", "annotations", contract.ClusterAnnotation)
		return c.MarshalJSON()
	}
	before, err := comparable(viewed)
	if err != nil {
		return nil, err
	}
	after, err := comparable(updated)
	if err != nil {
		return nil, err
	}
	raw, err := jsonpatch.CreateMergePatch(before, after)
	if err != nil {
		return nil, err
	}
	var patch map[string]interface{}
	if err := json.Unmarshal(raw, &patch); err != nil {
		return nil, err
	}
	if len(patch) == 0 {
		return nil, nil
	}
	meta, _ := patch["metadata"].(map[string]interface{})
	if meta == nil {
		meta = map[string]interface{}{}
		patch["metadata"] = meta
	}
	meta["resourceVersion"] = resourceVersion
	return json.Marshal(patch)
}

// Delete deletes name when the source object is a related copy of the request's location, with
// its uid and resourceVersion as preconditions, and returns the location's view of it as it
// was. A delete of an object the location's view shows that is not its related copy is 405,
// as every delete through a view before related copies; of one the view does not show 404.
// Errors also: 409 when the request's preconditions do not hold, 400 for a name held by several
// logical clusters on a kcp source's all-clusters path.
func (w *objectWrites) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	result, err := w.delete(ctx, name, deleteValidation, options)
	observeRelatedWrite(w.gr(), "delete", err)
	if err != nil {
		return nil, false, err
	}
	return result, true, nil
}

func (w *objectWrites) delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, error) {
	location, _ := LocationFrom(ctx)
	st := w.marks.st
	gr := w.gr()
	namespace := genericapirequest.NamespaceValue(ctx)
	cluster := st.clusters.requestCluster(ctx)
	if cluster == "" {
		obj, err := st.clusters.find(ctx, st.store, gr, location, namespace, name)
		if err != nil {
			return nil, err
		}
		cluster = obj.Cluster()
	}
	if (st.clusters.plain != "" && cluster != st.clusters.plain) || !PartFrom(ctx).Contains(cluster, namespace) {
		return nil, apierrors.NewNotFound(gr, name)
	}
	client, err := st.source.ClusterResource(st.info.GVR, cluster, namespace)
	if err != nil {
		return nil, sourceError(err)
	}
	current := w.marks.sourceCopy(cluster, namespace, name)
	cached := current != nil
	for attempt := 1; ; {
		if current == nil {
			current, err = client.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, apierrors.NewNotFound(gr, name)
			}
			if err != nil {
				return nil, sourceError(err)
			}
		}
		if !isRelatedCopyOf(current, location) {
			if cached {
				current, cached = nil, false // decide on the source's object
				continue
			}
			if _, _, shown := st.store.GetInCluster(location, cluster, namespace, name); shown {
				return nil, readOnly(gr, "delete", location)
			}
			return nil, apierrors.NewNotFound(gr, name)
		}
		viewed := withClusterAnnotation(st.store.LocationView(current, cluster, st.store.Assignment(current, cluster), location), cluster)
		lost, err := w.deleteCopy(ctx, client, location, cluster, current, viewed, deleteValidation, options)
		switch {
		case err != nil && cached:
			current, cached = nil, false // decide again on the source's object
			continue
		case lost && attempt < maxWriteAttempts:
			current = nil
			attempt++
			continue
		case err != nil:
			return nil, err
		}
		return viewed, nil
	}
}

// deleteCopy is one attempt of Delete on current, a related copy of location, whose view is
// viewed: the request's preconditions and deleteValidation are checked, then the source object
// is deleted with current's uid and resourceVersion as preconditions. lost says that the source
// answered 409 (the object changed since current was read): the delete is to be decided again
// on a fresh read.
func (w *objectWrites) deleteCopy(ctx context.Context, client dynamic.ResourceInterface, location, cluster string, current, viewed *unstructured.Unstructured, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (lost bool, err error) {
	st := w.marks.st
	gr := w.gr()
	name := current.GetName()
	stale := apierrors.NewConflict(gr, name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	if p := options.Preconditions; p != nil {
		if p.UID != nil && *p.UID != current.GetUID() {
			return false, apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, current.GetUID()))
		}
		if p.ResourceVersion != nil && !st.preconditionHolds(ctx, location, cluster, current, *p.ResourceVersion) {
			return false, stale
		}
	}
	if deleteValidation != nil {
		if err := deleteValidation(ctx, viewed); err != nil {
			return false, err
		}
	}
	uid, rv := current.GetUID(), current.GetResourceVersion()
	err = client.Delete(ctx, name, metav1.DeleteOptions{
		Preconditions:      &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		PropagationPolicy:  options.PropagationPolicy,
		GracePeriodSeconds: options.GracePeriodSeconds,
		DryRun:             options.DryRun,
	})
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsConflict(err):
		return true, stale
	case apierrors.IsNotFound(err):
		return false, apierrors.NewNotFound(gr, name)
	}
	return false, relatedWriteError(err)
}

// gr is the resource written.
func (w *objectWrites) gr() schema.GroupResource { return w.marks.st.info.GVR.GroupResource() }

// relatedWriteError is the answer to a failed source write of a related copy: the source's own
// answer when it is about the object (400, 404, 409, 413, 422: a name taken, an object its
// validation refuses), sourceError's otherwise.
func relatedWriteError(err error) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch status.Status().Code {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
			return err
		}
	}
	return sourceError(err)
}
