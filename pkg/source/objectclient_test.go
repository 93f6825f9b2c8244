package source

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	discoveryfake "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
)

// sourceServer answers like kube-apiserver, in JSON: a list of two ConfigMaps (with
// managedFields), a watch stream of an ADDED, a BOOKMARK ending the initial events and an
// ERROR (410 Gone), and a 403 Status for deployments. It records the queries it was sent.
func sourceServer(t *testing.T) (*httptest.Server, *[]url.Values) {
	t.Helper()
	var queries []url.Values
	cm := func(name, rv string) string {
		return fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":%q,"namespace":"ns","uid":"u-%s","resourceVersion":%q,`+
			`"labels":{"app":"web"},"annotations":{"kcp.io/assigned-locations":"[\"east\"]"},`+
			`"managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{}}}]},"data":{"k":"v"}}`, name, name, rv)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.Query())
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/apis/apps/v1/deployments":
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"deployments.apps is forbidden: User \"mapper\" cannot list resource","reason":"Forbidden","details":{"group":"apps","kind":"deployments"},"code":403}`)
		case r.URL.Path == "/api/v1/configmaps" && r.URL.Query().Get("watch") == "true":
			flusher := w.(http.Flusher)
			for _, frame := range []string{
				`{"type":"ADDED","object":` + cm("c", "12") + `}`,
				`{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
				`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}`,
			} {
				fmt.Fprintln(w, frame)
				flusher.Flush()
			}
		case r.URL.Path == "/api/v1/configmaps":
			fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"11","continue":"tok","remainingItemCount":3},"items":[%s,%s]}`, cm("a", "10"), cm("b", "11"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &queries
}

// TestObjectClientListsAndWatches runs Source.List and Source.Watch through the object client
// against a server that answers like kube-apiserver: objects arrive as Objects without
// managedFields, with the list's metadata, bookmarks and error Statuses decoded, errors as API
// errors, and the list options sent as the dynamic client sends them.
func TestObjectClientListsAndWatches(t *testing.T) {
	srv, queries := sourceServer(t)
	objects, err := NewObjectClient(&rest.Config{Host: srv.URL}, nil, Annotation{Key: "kcp.io/cluster", Value: "root"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Dynamic: fakeDynamic(), Discovery: &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}, Objects: objects})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	obj, err := s.List(ctx, configMapsGVR, metav1.ListOptions{ResourceVersion: "0", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	list, ok := obj.(*List)
	if !ok {
		t.Fatalf("List returned %T, want *List", obj)
	}
	if list.ResourceVersion != "11" || list.Continue != "tok" || list.RemainingItemCount == nil || *list.RemainingItemCount != 3 || len(list.Items) != 2 {
		t.Fatalf("list metadata %+v with %d items", list.ListMeta, len(list.Items))
	}
	for i, name := range []string{"a", "b"} {
		o := list.Items[i]
		if o.Name != name || o.Namespace != "ns" || o.Labels["app"] != "web" || o.Kind != "ConfigMap" || strings.Contains(string(o.JSON().Bytes()), "managedFields") {
			t.Errorf("item %d: %+v %s", i, o.ObjectMeta, o.JSON().Bytes())
		}
		if _, _, added := o.Added(); !added || !strings.Contains(string(o.JSON().Bytes()), `"kcp.io/cluster":"root"`) {
			t.Errorf("item %d lacks the annotation the client adds: %s", i, o.JSON().Bytes())
		}
	}
	if q := (*queries)[0]; q.Get("resourceVersion") != "0" || q.Get("limit") != "500" {
		t.Errorf("list query %v", q)
	}

	_, err = s.List(ctx, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("a 403 Status answered %v, want a Forbidden API error", err)
	}

	w, err := s.Watch(ctx, configMapsGVR, metav1.ListOptions{ResourceVersion: "10", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if q := (*queries)[2]; q.Get("watch") != "true" || q.Get("resourceVersion") != "10" || q.Get("allowWatchBookmarks") != "true" {
		t.Errorf("watch query %v", q)
	}
	var got []string
	for e := range w.ResultChan() {
		switch o := e.Object.(type) {
		case *Object:
			got = append(got, fmt.Sprintf("%s %s@%s %v", e.Type, o.Name, o.ResourceVersion, o.Annotations))
		case *metav1.Status:
			got = append(got, fmt.Sprintf("%s %d %s", e.Type, o.Code, o.Reason))
		default:
			t.Fatalf("event %s carries %T", e.Type, e.Object)
		}
		if e.Type == watch.Error {
			break
		}
	}
	want := []string{
		`ADDED c@12 map[kcp.io/assigned-locations:["east"] kcp.io/cluster:root]`,
		`BOOKMARK @12 map[k8s.io/initial-events-end:true kcp.io/cluster:root]`,
		`ERROR 410 Expired`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
}
