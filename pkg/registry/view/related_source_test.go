package view

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

var (
	secretsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	mappingsGVR     = controlv1alpha1.SchemeGroupVersion.WithResource("resourcemappings")
	relatedTestKind = map[schema.GroupVersionResource]source.ResourceInfo{
		configMapsGVR: configMapsInfo,
		secretsGVR:    {GVR: secretsGVR, Kind: "Secret", ListKind: "SecretList", SingularName: "secret", Namespaced: true},
		mappingsGVR:   {GVR: mappingsGVR, Kind: "ResourceMapping", ListKind: "ResourceMappingList", SingularName: "resourcemapping"},
	}
)

// relatedEnv is a real kube-apiserver (the source, with the ResourceMapping CRD) and views over
// stores of its ConfigMaps (the main objects), Secrets (the related copies) and
// ResourceMappings, which the test brings up to date by listing the source (refresh), as the
// cache's reflectors would.
type relatedEnv struct {
	t      *testing.T
	ctx    context.Context
	dyn    dynamic.Interface
	kube   kubernetes.Interface
	stores map[schema.GroupVersionResource]*cache.ResourceStore
	views  *Views
}

func (e *relatedEnv) Discovered() bool { return true }

func (e *relatedEnv) Resources() []source.ResourceInfo {
	out := make([]source.ResourceInfo, 0, len(e.stores))
	for gvr := range e.stores {
		out = append(out, relatedTestKind[gvr])
	}
	return out
}

func (e *relatedEnv) Store(gvr schema.GroupVersionResource) (Store, bool) {
	s, ok := e.stores[gvr]
	return s, ok
}

// refresh lists every resource from the source and replaces its store's contents.
func (e *relatedEnv) refresh() {
	e.t.Helper()
	for gvr, s := range e.stores {
		l, err := e.dyn.Resource(gvr).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		items := make([]interface{}, len(l.Items))
		for i := range l.Items {
			items[i] = &l.Items[i]
		}
		if err := s.Replace(items, l.GetResourceVersion()); err != nil {
			e.t.Fatal(err)
		}
	}
}

// serve runs one request inside location's view: method on innerPath with body (JSON; a PATCH
// of contentType) and returns the status code and the decoded answer.
func (e *relatedEnv) serve(location, method, innerPath, contentType, body string) (int, map[string]interface{}) {
	e.t.Helper()
	req := httptest.NewRequest(method, "http://x"+contract.ViewPath(location, "")+innerPath, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req = req.WithContext(audit.WithAuditContext(e.ctx))
	p, _, _ := strings.Cut(innerPath, "?")
	rec := httptest.NewRecorder()
	e.views.ServeView(rec, req, location, p)
	var out map[string]interface{}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		e.t.Fatalf("%s %s: %d %s: %v", method, innerPath, rec.Code, rec.Body.String(), err)
	}
	return rec.Code, out
}

// expect runs a request and fails unless it answers code; it returns the answer.
func (e *relatedEnv) expect(what string, code int, location, method, innerPath, contentType, body string) map[string]interface{} {
	e.t.Helper()
	got, out := e.serve(location, method, innerPath, contentType, body)
	if got != code {
		e.t.Fatalf("%s: %s %s through %s's view answered %d %v, want %d", what, method, innerPath, location, got, out["message"], code)
	}
	return out
}

// secret returns the source's Secret ns/name, or nil when there is none.
func (e *relatedEnv) secret(name string) *unstructured.Unstructured {
	e.t.Helper()
	u, err := e.dyn.Resource(secretsGVR).Namespace("ns").Get(e.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return u
}

// newRelatedEnv starts the source with namespace ns, the ConfigMap ns/db assigned to east, the
// ConfigMap ns/elsewhere assigned to west, and the ResourceMapping db-mapping assigned to east
// (source configmaps; related entry "creds" of origin Target, resource secrets).
func newRelatedEnv(t *testing.T) (*relatedEnv, *unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cp := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	framework.InstallControlCRD(t, ctx, cp, mappingsGVR)
	dyn, kube := sourceWithNamespace(t, ctx, cp)
	var db *unstructured.Unstructured
	for _, o := range []*unstructured.Unstructured{cm("ns", "db", 0, "x", "east"), cm("ns", "elsewhere", 0, "x", "west")} {
		unstructured.RemoveNestedField(o.Object, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(o.Object, "metadata", "uid")
		created, err := dyn.Resource(configMapsGVR).Namespace("ns").Create(ctx, o, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.GetName() == "db" {
			db = created
		}
	}
	mapping := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": mappingsGVR.GroupVersion().String(), "kind": "ResourceMapping",
		"metadata": map[string]interface{}{"name": "db-mapping", "annotations": map[string]interface{}{contract.AssignedLocationsAnnotation: `["east"]`}},
		"spec": map[string]interface{}{
			"source": map[string]interface{}{"group": "", "version": "v1", "resource": "configmaps"},
			"related": []interface{}{map[string]interface{}{
				"identifier": "creds", "origin": "Target",
				"resource": map[string]interface{}{"group": "", "version": "v1", "resource": "secrets"},
				"object":   map[string]interface{}{"name": `object.metadata.name + "-creds"`},
			}},
		},
	}}
	if _, err := dyn.Resource(mappingsGVR).Create(ctx, mapping, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := &relatedEnv{t: t, ctx: ctx, dyn: dyn, kube: kube, stores: map[schema.GroupVersionResource]*cache.ResourceStore{}}
	for gvr, info := range relatedTestKind {
		s := cache.NewResourceStore(gvr, info.GVK(), info.Namespaced, cache.StoreOptions{DefaultCluster: "root"})
		t.Cleanup(s.Close)
		e.stores[gvr] = s
	}
	e.refresh()
	e.views = New(e, liveSource{dyn: dyn}, Options{PlainCluster: "root", FreshnessTimeout: time.Second})
	return e, db
}

// relatedCopy is the JSON of a Secret named name that location brings up for the main object
// db: the three labels (owner-uid ownerUID), the mapping annotation and the ownerReference
// (to uid ownerUID as well).
func relatedCopy(name, location string, db *unstructured.Unstructured, ownerUID, data string) string {
	b, _ := json.Marshal(map[string]interface{}{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]interface{}{
			"name": name, "namespace": "ns",
			"labels": map[string]interface{}{
				contract.RelatedLocationLabel: location, contract.RelatedOwnerUIDLabel: ownerUID, contract.RelatedIdentifierLabel: "creds",
			},
			"annotations": map[string]interface{}{contract.RelatedMappingAnnotation: "db-mapping"},
			"ownerReferences": []interface{}{map[string]interface{}{
				"apiVersion": "v1", "kind": "ConfigMap", "name": db.GetName(), "uid": ownerUID,
			}},
		},
		"stringData": map[string]interface{}{"password": data},
	})
	return string(b)
}

// requests runs do and returns the requests on Secrets it made the source answer, by "VERB"
// and "VERB code" (sourceRequests), for keys.
func (e *relatedEnv) requests(do func(), keys ...string) map[string]float64 {
	e.t.Helper()
	before := sourceRequests(e.t, e.ctx, e.kube, "secrets")
	do()
	after := sourceRequests(e.t, e.ctx, e.kube, "secrets")
	out := map[string]float64{}
	for _, k := range keys {
		out[k] = after[k] - before[k]
	}
	return out
}

// password returns the Secret's password as the source holds it.
func password(u *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(u.Object, "data", "password")
	return s
}

const secretsPath = "/api/v1/namespaces/ns/secrets"

// TestRelatedCopiesThroughViews runs a location's writes of related copies through views
// (ServeView, k8s.io/apiserver's create, update, patch and delete handlers) against a real
// kube-apiserver (docs/views.md, "Related copies"):
//   - east creates a Secret marked as its related copy of db (assigned to east) through the
//     mapping db-mapping: it is in the source, with the labels, the annotation and the
//     ownerReference; east updates it (PUT), patches it (merge patch) and server-side applies
//     it; an update that changes its owner-uid label is 403 and changes nothing;
//   - east's LIST with the selector related.kcp.io/location=east returns it, west's LIST
//     (with and without the selector) does not, and west can neither GET, update nor delete it
//     (404: a view never tells another location's objects from absent ones) nor create a copy
//     marked for east (403);
//   - a create without the label is 405, as every create through a view before; one whose
//     owner is not assigned to east, one naming an entry the mapping lacks, and one without
//     the ownerReference are 403; a create whose name is taken by a Secret that is no related
//     copy is 409 and leaves that Secret as it was; east's delete of db itself (in its view, no
//     related copy) is 405;
//   - a delete whose resourceVersion precondition does not hold is 409;
//   - once db is unassigned from east, an update of the copy is 403 but its delete succeeds.
func TestRelatedCopiesThroughViews(t *testing.T) {
	e, db := newRelatedEnv(t)
	uid := string(db.GetUID())

	// Creates that are refused; nothing reaches the source.
	e.expect("a create without the label", http.StatusMethodNotAllowed, "east", "POST", secretsPath, "application/json",
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"arbitrary","namespace":"ns"}}`)
	e.expect("west creating a copy marked for east", http.StatusForbidden, "west", "POST", secretsPath, "application/json",
		relatedCopy("west-made", "east", db, uid, "p"))
	elsewhere, err := e.dyn.Resource(configMapsGVR).Namespace("ns").Get(e.ctx, "elsewhere", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.expect("a copy whose owner is not assigned to east", http.StatusForbidden, "east", "POST", secretsPath, "application/json",
		relatedCopy("not-east", "east", elsewhere, string(elsewhere.GetUID()), "p"))
	e.expect("a copy whose owner-uid is not db's", http.StatusForbidden, "east", "POST", secretsPath, "application/json",
		relatedCopy("wrong-uid", "east", db, "0000", "p"))
	noEntry := strings.Replace(relatedCopy("no-entry", "east", db, uid, "p"), `"creds"`, `"certs"`, 1)
	e.expect("a copy of an entry the mapping lacks", http.StatusForbidden, "east", "POST", secretsPath, "application/json", noEntry)
	var noOwner map[string]interface{}
	_ = json.Unmarshal([]byte(relatedCopy("no-owner", "east", db, uid, "p")), &noOwner)
	delete(noOwner["metadata"].(map[string]interface{}), "ownerReferences")
	b, _ := json.Marshal(noOwner)
	e.expect("a copy without the ownerReference", http.StatusForbidden, "east", "POST", secretsPath, "application/json", string(b))
	for _, name := range []string{"arbitrary", "west-made", "not-east", "wrong-uid", "no-entry", "no-owner"} {
		if e.secret(name) != nil {
			t.Errorf("a refused create left the Secret %s in the source", name)
		}
	}

	// The name is taken by a Secret that is no related copy: 409, and it stays as it was.
	taken := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]interface{}{"name": "taken", "namespace": "ns"}, "stringData": map[string]interface{}{"password": "theirs"}}}
	if _, err := e.dyn.Resource(secretsGVR).Namespace("ns").Create(e.ctx, taken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := e.secret("taken")
	e.expect("a create whose name is taken", http.StatusConflict, "east", "POST", secretsPath, "application/json", relatedCopy("taken", "east", db, uid, "p"))
	if after := e.secret("taken"); after.GetResourceVersion() != before.GetResourceVersion() || len(after.GetLabels()) != 0 {
		t.Errorf("the Secret holding the name changed: %v", after.Object)
	}

	// East creates its copy.
	created := e.expect("east's create", http.StatusCreated, "east", "POST", secretsPath, "application/json", relatedCopy("db-creds-east", "east", db, uid, "v1"))
	if created["metadata"].(map[string]interface{})["annotations"].(map[string]interface{})[contract.ClusterAnnotation] != "root" {
		t.Errorf("the answer is not the view's object: %v", created["metadata"])
	}
	src := e.secret("db-creds-east")
	if src == nil {
		t.Fatal("east's related copy is not in the source")
	}
	if refs := src.GetOwnerReferences(); len(refs) != 1 || string(refs[0].UID) != uid || src.GetLabels()[contract.RelatedLocationLabel] != "east" ||
		src.GetAnnotations()[contract.RelatedMappingAnnotation] != "db-mapping" || src.GetAnnotations()[contract.ClusterAnnotation] != "" {
		t.Errorf("the source's copy %v", src.Object)
	}
	e.refresh()

	// Reads: east lists its copies, west sees none.
	sel := "?labelSelector=" + url.QueryEscape(contract.RelatedLocationLabel+"=east")
	if got := itemNames(e.expect("east's list", http.StatusOK, "east", "GET", secretsPath+sel, "", "")); got != "root/db-creds-east" {
		t.Errorf("east lists %q with the selector, want its copy", got)
	}
	for _, q := range []string{sel, ""} {
		if got := itemNames(e.expect("west's list", http.StatusOK, "west", "GET", secretsPath+q, "", "")); got != "" {
			t.Errorf("west lists %q (query %q), want nothing", got, q)
		}
	}
	e.expect("west's GET of east's copy", http.StatusNotFound, "west", "GET", secretsPath+"/db-creds-east", "", "")

	// East updates, patches and applies its copy; other writes are refused.
	view := e.expect("east's GET", http.StatusOK, "east", "GET", secretsPath+"/db-creds-east", "", "")
	view["stringData"] = map[string]interface{}{"password": "v2"}
	b, _ = json.Marshal(view)
	// With the cache's copy current, an update is one PATCH at the source.
	got := e.requests(func() {
		e.expect("east's update", http.StatusOK, "east", "PUT", secretsPath+"/db-creds-east", "application/json", string(b))
	}, "GET", "PUT", "PATCH")
	if got["PATCH"] != 1 || got["GET"] != 0 || got["PUT"] != 0 {
		t.Errorf("east's update with the cache's copy current sent %v to the source; want one PATCH", got)
	}
	if got := password(e.secret("db-creds-east")); got != "djI=" {
		t.Errorf("password after east's update %q, want v2 (djI=)", got)
	}
	// The cache has not seen that update: the PATCH made from its copy is refused (409, its
	// resourceVersion is the precondition) and made again on the object read fresh.
	got = e.requests(func() {
		e.expect("east's merge patch", http.StatusOK, "east", "PATCH", secretsPath+"/db-creds-east", "application/merge-patch+json", `{"data":{"password":"djM="}}`)
	}, "GET", "PATCH", "PATCH 409")
	if got["PATCH"] != 2 || got["PATCH 409"] != 1 || got["GET"] != 1 {
		t.Errorf("east's patch with a stale cache sent %v to the source; want a PATCH answered 409, a GET, a PATCH", got)
	}
	if got := password(e.secret("db-creds-east")); got != "djM=" {
		t.Errorf("password after east's patch %q, want v3 (djM=)", got)
	}
	e.refresh()
	e.expect("east's server-side apply", http.StatusOK, "east", "PATCH", secretsPath+"/db-creds-east?fieldManager=mapper&force=true", "application/apply-patch+yaml",
		fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db-creds-east","labels":{%q:"east",%q:%q,%q:"creds"},"annotations":{%q:"db-mapping"},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"db","uid":%q}]},"data":{"password":"djQ="}}`,
			contract.RelatedLocationLabel, contract.RelatedOwnerUIDLabel, uid, contract.RelatedIdentifierLabel, contract.RelatedMappingAnnotation, uid))
	if got := password(e.secret("db-creds-east")); got != "djQ=" {
		t.Errorf("password after east's apply %q, want v4 (djQ=)", got)
	}
	// A server-side apply of a name that does not exist creates nothing: a copy is created
	// with a create (405 saying so); without the label the answer is the 404 as before.
	e.expect("east's server-side apply of a new copy", http.StatusMethodNotAllowed, "east", "PATCH", secretsPath+"/db-creds-apply?fieldManager=mapper", "application/apply-patch+yaml",
		relatedCopy("db-creds-apply", "east", db, uid, "applied"))
	if e.secret("db-creds-apply") != nil {
		t.Error("east's apply of a new copy created it")
	}
	e.expect("a server-side apply of a new object without the label", http.StatusNotFound, "east", "PATCH", secretsPath+"/applied-arbitrary?fieldManager=mapper", "application/apply-patch+yaml",
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"applied-arbitrary"}}`)
	e.refresh()
	before = e.secret("db-creds-east")
	e.expect("east changing the owner-uid label", http.StatusForbidden, "east", "PATCH", secretsPath+"/db-creds-east", "application/merge-patch+json",
		fmt.Sprintf(`{"metadata":{"labels":{%q:"other"}}}`, contract.RelatedOwnerUIDLabel))
	e.expect("west's update of east's copy", http.StatusNotFound, "west", "PATCH", secretsPath+"/db-creds-east", "application/merge-patch+json", `{"data":{"password":"d2VzdA=="}}`)
	e.expect("west's delete of east's copy", http.StatusNotFound, "west", "DELETE", secretsPath+"/db-creds-east", "", "")
	e.expect("east's delete with a stale resourceVersion precondition", http.StatusConflict, "east", "DELETE", secretsPath+"/db-creds-east", "application/json",
		`{"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"resourceVersion":"1"}}`)
	if after := e.secret("db-creds-east"); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("refused writes changed east's copy: %v", after.Object)
	}
	e.expect("east's delete of db (no related copy)", http.StatusMethodNotAllowed, "east", "DELETE", "/api/v1/namespaces/ns/configmaps/db", "", "")

	// db leaves east: no more updates, but east deletes its copy.
	db, err = e.dyn.Resource(configMapsGVR).Namespace("ns").Get(e.ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	db.SetAnnotations(nil)
	if _, err := e.dyn.Resource(configMapsGVR).Namespace("ns").Update(e.ctx, db, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.refresh()
	e.expect("east's update after the unassignment", http.StatusForbidden, "east", "PATCH", secretsPath+"/db-creds-east", "application/merge-patch+json", `{"data":{"password":"djU="}}`)
	got = e.requests(func() {
		e.expect("east's delete after the unassignment", http.StatusOK, "east", "DELETE", secretsPath+"/db-creds-east", "", "")
	}, "GET", "DELETE")
	if got["DELETE"] != 1 || got["GET"] != 0 {
		t.Errorf("east's delete with the cache's copy current sent %v to the source; want one DELETE", got)
	}
	if e.secret("db-creds-east") != nil {
		t.Error("east's copy is still in the source after its delete")
	}
	e.expect("east's delete of its deleted copy", http.StatusNotFound, "east", "DELETE", secretsPath+"/db-creds-east", "", "")
}
