package served

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// resettable is a RESTMapper that learns a kind on its first Reset, as a discovery-backed
// mapper learns a CRD installed after it first read discovery.
type resettable struct {
	*meta.DefaultRESTMapper
	resets int
	later  schema.GroupVersionKind
}

func (r *resettable) Reset() {
	r.resets++
	r.Add(r.later, meta.RESTScopeNamespace)
}

func TestResolver(t *testing.T) {
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	m := &resettable{DefaultRESTMapper: meta.NewDefaultRESTMapper(nil), later: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}}
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	r := New(m)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.Now = func() time.Time { return now }

	if gvk, err := r.Kind(deployments); err != nil || gvk.Kind != "Deployment" {
		t.Errorf("deployments: %v %v", gvk, err)
	}
	singular := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployment"}
	_, err := r.Kind(singular)
	if !IsNotServed(err) || !strings.Contains(err.Error(), "it serves deployments.apps (apps/v1)") {
		t.Errorf("a singular: %v", err)
	}
	if m.resets != 1 {
		t.Errorf("%d resets after the first unknown resource, want 1", m.resets)
	}
	if _, err := r.Kind(schema.GroupVersionResource{Group: "apps", Version: "v2", Resource: "deployments"}); !IsNotServed(err) {
		t.Errorf("an unserved version: %v", err)
	}
	if m.resets != 1 {
		t.Errorf("%d resets within the refresh period, want 1", m.resets)
	}
	// The Widget CRD was installed meanwhile; once the refresh period has passed it is found.
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	m.later = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	now = now.Add(DefaultRefresh)
	if gvk, err := r.Kind(widgets); err != nil || gvk.Kind != "Widget" {
		t.Errorf("widgets after the refresh: %v %v", gvk, err)
	}
	if gvr, err := r.Resource(widgets.GroupResource()); err != nil || gvr != widgets {
		t.Errorf("the version of widgets: %v %v", gvr, err)
	}
	if _, err := r.Resource(schema.GroupResource{Resource: "gadgets"}); !IsNotServed(err) {
		t.Errorf("gadgets: %v", err)
	}
}
