package view

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestRelatedCreateOnKCPSource: on a kcp source a related copy is created in one logical
// cluster: a create on the all-clusters path is 400 naming the per-cluster path, and through
// /clusters/c1 the rules decide (here 403: the views serve no ResourceMappings, so no mapping
// can name the copy); nothing reaches any cluster.
func TestRelatedCreateOnKCPSource(t *testing.T) {
	v, c := newClusterViews(t)
	e := &relatedEnv{t: t, ctx: context.Background(), views: v}
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"copy","namespace":"ns","labels":{%q:"east",%q:"c1-ns-same",%q:"creds"},"annotations":{%q:"m"},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"same","uid":"c1-ns-same"}]}}`,
		contract.RelatedLocationLabel, contract.RelatedOwnerUIDLabel, contract.RelatedIdentifierLabel, contract.RelatedMappingAnnotation)
	out := e.expect("a create on the all-clusters path", http.StatusBadRequest, "east", "POST", "/api/v1/namespaces/ns/configmaps", "application/json", body)
	if msg, _ := out["message"].(string); !strings.Contains(msg, contract.ViewPath("east", "<cluster>")) {
		t.Errorf("the 400 does not name the per-cluster path: %q", msg)
	}
	out = e.expect("a create without ResourceMappings served", http.StatusForbidden, "east", "POST", "/clusters/c1/api/v1/namespaces/ns/configmaps", "application/json", body)
	if msg, _ := out["message"].(string); !strings.Contains(msg, "resourcemappings") {
		t.Errorf("the 403 does not say that no ResourceMapping is served: %q", msg)
	}
	for cl, src := range c.sources {
		if _, err := src.Resource(cmGVR).Namespace("ns").Get(context.Background(), "copy", metav1.GetOptions{}); err == nil {
			t.Errorf("a refused create reached cluster %s", cl)
		}
	}
}
