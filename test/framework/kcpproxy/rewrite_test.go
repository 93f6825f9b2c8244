package kcpproxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func obj(t *testing.T, s string) map[string]interface{} {
	t.Helper()
	var m map[string]interface{}
	if err := decodeJSON([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func asJSON(v interface{}) string {
	b, _ := json.Marshal(v)
	return string(b)
}

var cmGR = schema.GroupResource{Resource: "configmaps"}

func TestFromBacking(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    scope
		in   string
		want string // "" when the object is outside the scope
	}{
		{"one cluster", scope{cluster: "c1", gr: cmGR},
			`{"metadata":{"name":"x","namespace":"c1--ns","resourceVersion":"12345678901234567890"}}`,
			`{"metadata":{"annotations":{"kcp.io/cluster":"c1"},"name":"x","namespace":"ns","resourceVersion":"12345678901234567890"}}`},
		{"a stored kcp.io/cluster is overwritten", scope{cluster: Wildcard, gr: cmGR},
			`{"metadata":{"name":"x","namespace":"c2--ns","annotations":{"kcp.io/cluster":"forged","a":"b"}}}`,
			`{"metadata":{"annotations":{"a":"b","kcp.io/cluster":"c2"},"name":"x","namespace":"ns"}}`},
		{"another cluster", scope{cluster: "c1", gr: cmGR}, `{"metadata":{"name":"x","namespace":"c2--ns"}}`, ""},
		{"no cluster", scope{cluster: Wildcard, gr: cmGR}, `{"metadata":{"name":"x","namespace":"kube-system"}}`, ""},
		{"wildcard in one namespace", scope{cluster: Wildcard, namespace: "a", gr: cmGR}, `{"metadata":{"name":"x","namespace":"c2--b"}}`, ""},
		{"a Namespace", scope{cluster: "c1", namespaces: true},
			`{"kind":"Namespace","metadata":{"name":"c1--ns","labels":{"kubernetes.io/metadata.name":"c1--ns"}},"spec":{"finalizers":["kubernetes"]}}`,
			`{"kind":"Namespace","metadata":{"annotations":{"kcp.io/cluster":"c1"},"labels":{"kubernetes.io/metadata.name":"ns"},"name":"ns"},"spec":{"finalizers":["kubernetes"]}}`},
		{"a number keeps its digits", scope{cluster: "c1", gr: cmGR},
			`{"metadata":{"name":"x","namespace":"c1--ns","generation":9007199254740993}}`,
			`{"metadata":{"annotations":{"kcp.io/cluster":"c1"},"generation":9007199254740993,"name":"x","namespace":"ns"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := obj(t, tc.in)
			ok := tc.s.fromBacking(o)
			if ok != (tc.want != "") {
				t.Fatalf("fromBacking = %v", ok)
			}
			if ok && asJSON(o) != tc.want {
				t.Fatalf("got %s\nwant %s", asJSON(o), tc.want)
			}
		})
	}
}

func TestToBacking(t *testing.T) {
	s := scope{cluster: "c1", namespace: "ns", gr: cmGR}
	o := obj(t, `{"metadata":{"name":"x","namespace":"ns","annotations":{"kcp.io/cluster":"c1","a":"b"}}}`)
	if err := s.toBacking(o); err != nil {
		t.Fatal(err)
	}
	if got, want := asJSON(o), `{"metadata":{"annotations":{"a":"b"},"name":"x","namespace":"c1--ns"}}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	for _, in := range []string{
		`{"metadata":{"annotations":{"kcp.io/cluster":"c2"}}}`,
		`{"metadata":{"annotations":{"kcp.io/cluster":null}}}`, // removal in a merge patch
	} {
		if err := s.toBacking(obj(t, in)); !apierrors.IsInvalid(err) {
			t.Errorf("toBacking(%s) = %v, want 422 Invalid", in, err)
		}
	}
	ns := scope{cluster: "c1", namespaces: true}
	o = obj(t, `{"metadata":{"name":"team","generateName":"g-"}}`)
	if err := ns.toBacking(o); err != nil || asJSON(o) != `{"metadata":{"generateName":"c1--g-","name":"c1--team"}}` {
		t.Fatalf("Namespace: %s, %v", asJSON(o), err)
	}
	if err := s.toBacking(obj(t, `{"metadata":{"namespace":"Not_Valid"}}`)); !apierrors.IsBadRequest(err) {
		t.Errorf("an invalid namespace: %v, want 400", err)
	}
}

func TestJSONPatchToBacking(t *testing.T) {
	s := scope{cluster: "c1", namespace: "ns", gr: cmGR}
	var ops []interface{}
	_ = decodeJSON([]byte(`[
		{"op":"test","path":"/metadata/annotations/kcp.io~1cluster","value":"c1"},
		{"op":"replace","path":"/metadata/namespace","value":"ns"},
		{"op":"add","path":"/metadata/annotations","value":{"kcp.io/cluster":"c1","a":"b"}},
		{"op":"replace","path":"/data/k","value":"v"}]`), &ops)
	got, err := s.jsonPatchToBacking(ops)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"replace","path":"/metadata/namespace","value":"c1--ns"},{"op":"add","path":"/metadata/annotations","value":{"a":"b"}},{"op":"replace","path":"/data/k","value":"v"}]`
	if asJSON(got) != want {
		t.Fatalf("got %s\nwant %s", asJSON(got), want)
	}
	for _, bad := range []string{
		`[{"op":"remove","path":"/metadata/annotations/kcp.io~1cluster"}]`,
		`[{"op":"replace","path":"/metadata/annotations/kcp.io~1cluster","value":"c2"}]`,
		`[{"op":"move","from":"/metadata/annotations/kcp.io~1cluster","path":"/metadata/annotations/x"}]`,
		`[{"op":"remove","path":"/metadata/annotations/x"},{"op":"move","from":"/metadata/annotations","path":"/metadata/labels"}]`,
		`[{"op":"add","path":"/metadata","value":{"annotations":{"kcp.io/cluster":"c2"}}}]`,
	} {
		var ops []interface{}
		_ = decodeJSON([]byte(bad), &ops)
		if _, err := s.jsonPatchToBacking(ops); !apierrors.IsInvalid(err) {
			t.Errorf("jsonPatchToBacking(%s) = %v, want 422 Invalid", bad, err)
		}
	}
}

func TestFieldSelectorToBacking(t *testing.T) {
	q := url.Values{"fieldSelector": {"metadata.namespace=ns,metadata.name=x"}}
	if err := (scope{cluster: "c1"}).fieldSelectorToBacking(q); err != nil || q.Get("fieldSelector") != "metadata.name=x,metadata.namespace=c1--ns" {
		t.Fatalf("one cluster: %q, %v", q.Get("fieldSelector"), err)
	}
	q = url.Values{"fieldSelector": {"metadata.name=team"}}
	if err := (scope{cluster: "c1", namespaces: true}).fieldSelectorToBacking(q); err != nil || q.Get("fieldSelector") != "metadata.name=c1--team" {
		t.Fatalf("namespaces: %q, %v", q.Get("fieldSelector"), err)
	}
	q = url.Values{"fieldSelector": {"metadata.namespace!=ns"}}
	if err := (scope{cluster: Wildcard}).fieldSelectorToBacking(q); !apierrors.IsBadRequest(err) {
		t.Fatalf("wildcard: %v, want 400", err)
	}
}

func TestResponseFromBacking(t *testing.T) {
	list := obj(t, `{"kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[
		{"metadata":{"name":"a","namespace":"c1--ns"}},
		{"metadata":{"name":"a","namespace":"c2--ns"}},
		{"metadata":{"name":"b","namespace":"default"}}]}`)
	(scope{cluster: Wildcard, gr: cmGR}).responseFromBacking(list)
	want := `{"items":[{"metadata":{"annotations":{"kcp.io/cluster":"c1"},"name":"a","namespace":"ns"}},{"metadata":{"annotations":{"kcp.io/cluster":"c2"},"name":"a","namespace":"ns"}}],"kind":"ConfigMapList","metadata":{"resourceVersion":"7"}}`
	if asJSON(list) != want {
		t.Fatalf("got %s\nwant %s", asJSON(list), want)
	}
	status := obj(t, `{"kind":"Status","code":404,"message":"namespaces \"c1--ns\" not found","details":{"name":"c1--ns","kind":"namespaces"}}`)
	(scope{cluster: "c1", namespace: "ns", gr: cmGR}).responseFromBacking(status)
	if !reflect.DeepEqual(status["message"], `namespaces "ns" not found`) || status["details"].(map[string]interface{})["name"] != "ns" {
		t.Fatalf("Status: %s", asJSON(status))
	}
}

func TestWatchEventFromBacking(t *testing.T) {
	s := scope{cluster: "c1", gr: cmGR}
	bookmark := &watchEvent{Type: "BOOKMARK", Object: obj(t, `{"metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}`)}
	if !s.watchEventFromBacking(bookmark) || asJSON(bookmark.Object) != `{"metadata":{"annotations":{"k8s.io/initial-events-end":"true"},"resourceVersion":"9"}}` {
		t.Fatalf("bookmark: %s", asJSON(bookmark.Object))
	}
	if s.watchEventFromBacking(&watchEvent{Type: "ADDED", Object: obj(t, `{"metadata":{"name":"a","namespace":"c2--ns"}}`)}) {
		t.Fatal("an event of another cluster was kept")
	}
}

func mustRequest(t *testing.T, path string) *http.Request {
	t.Helper()
	return httptest.NewRequest(http.MethodGet, path, nil)
}

func TestBackingPath(t *testing.T) {
	for _, tc := range []struct {
		cluster, path, want string
	}{
		{"c1", "/api/v1/namespaces/ns/configmaps/x/status", "/api/v1/namespaces/c1--ns/configmaps/x/status"},
		{"c1", "/apis/apps/v1/namespaces/ns/deployments", "/apis/apps/v1/namespaces/c1--ns/deployments"},
		{"c1", "/api/v1/namespaces/ns", "/api/v1/namespaces/c1--ns"},
		{"c1", "/api/v1/watch/namespaces/ns/configmaps", "/api/v1/watch/namespaces/c1--ns/configmaps"},
		{"c1", "/api/v1/configmaps", "/api/v1/configmaps"},
		{Wildcard, "/apis/apps/v1/namespaces/ns/deployments", "/apis/apps/v1/deployments"},
		{Wildcard, "/api/v1/watch/namespaces/ns", "/api/v1/watch/namespaces"},
	} {
		p := &Proxy{infos: newRequestInfoFactory()}
		r := mustRequest(t, tc.path)
		info, err := p.infos.NewRequestInfo(r)
		if err != nil {
			t.Fatal(err)
		}
		s := scope{cluster: tc.cluster, namespace: info.Namespace, namespaces: info.APIGroup == "" && info.Resource == "namespaces"}
		got, err := backingPath(tc.path, info, s)
		if err != nil || got != tc.want {
			t.Errorf("backingPath(%s, %s) = %q, %v; want %q", tc.cluster, tc.path, got, err, tc.want)
		}
	}
}
