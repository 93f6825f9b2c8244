package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
)

// TestMapperPrefixedNamespaces runs a mapper with --namespace-mapping=prefixed: source
// namespace ns of the (single, plain Kubernetes) logical cluster "default" lands in
// "default-<ns>", a name too long for that in a shortened name with a hash; both target
// namespaces record their origin; a target namespace recording another origin is a conflict.
func TestMapperPrefixedNamespaces(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startMapperEnv(t, ctx, "east")
	env.verifyArgs = []string{"--namespace-mapping=prefixed"}
	long := "a-namespace-name-that-is-long-enough-" + strings.Repeat("x", 20) // 57 characters
	for _, ns := range []string{"team-a", long, "clash"} {
		ensureNamespace(t, ctx, env.src, ns)
		if _, err := env.src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, "config", "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// "default-clash" exists on the target already, recording another origin.
	target := env.targets["east"].Admin().Client(t)
	taken := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default-clash", Annotations: map[string]string{
		contract.SourceClusterAnnotation: "other", contract.SourceNamespaceAnnotation: "clash",
	}}}
	if _, err := target.CoreV1().Namespaces().Create(ctx, taken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	m := env.startMapper(t, "mapper-east", "east", nil, "--namespace-mapping=prefixed")
	mapperEventually(t, ctx, 60*time.Second, "all but the clashing namespace's object are mapped", func() (bool, string) {
		r := env.verifyOnce(t, "east")
		return r.Total == 1 && r.Count(1) == 1 && r.Violations[0].Target == "default-clash/config", mapperReportText(r)
	})
	mapperEventually(t, ctx, 30*time.Second, "the clash is a conflict", func() (bool, string) {
		v, _ := m.metric("mapper_conflicts", `resource="configmaps"`)
		return v == 1, "mapper_conflicts=" + mapperFtoa(v)
	})

	hashed := mapper.NamespaceMappingPrefixed.TargetNamespace("default", long)
	if len(hashed) > 63 || !strings.HasPrefix(hashed, "default-a-namespace-name") || hashed == "default-"+long {
		t.Fatalf("the long namespace maps to %q", hashed)
	}
	for src, tgt := range map[string]string{"team-a": "default-team-a", long: hashed} {
		ns, err := target.CoreV1().Namespaces().Get(ctx, tgt, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("target namespace of %s: %v", src, err)
		}
		if ns.Labels[contract.LocationLabel] != "east" || ns.Annotations[contract.SourceNamespaceAnnotation] != src || ns.Annotations[contract.SourceClusterAnnotation] != "default" {
			t.Errorf("target namespace %s does not record its origin: %v %v", tgt, ns.Labels, ns.Annotations)
		}
		if env.targetObject(t, ctx, "east", configMapsGVR, tgt, "config") == nil {
			t.Errorf("the ConfigMap of %s is not in %s", src, tgt)
		}
	}
	if env.targetObject(t, ctx, "east", configMapsGVR, "team-a", "config") != nil {
		t.Error("the prefixed mapping put an object into the source's namespace name")
	}
}
