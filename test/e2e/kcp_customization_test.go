package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// The objects of TestKCPCustomizationsPerCluster: in every logical cluster, ConfigMap
// apps/settings assigned to east, and Customization apps/flavor, the same namespace/name in
// each cluster, setting data.flavor to a value of its own cluster (flavorOf).
const (
	kcpCustNamespace = "apps"
	kcpCustObject    = "settings"
	kcpCustName      = "flavor"
	kcpCustLocation  = "east"
	// kcpCustNone stands for a view's ConfigMap without data.flavor.
	kcpCustNone = "<none>"
)

// flavorOf is the data.flavor that cluster's Customization sets (version tells two
// Customizations of one cluster apart).
func flavorOf(cluster string, version int) string { return fmt.Sprintf("%s-v%d", cluster, version) }

// TestKCPCustomizationsPerCluster (kcp mode) runs mapper-apiserver in
// --source-mode=kcp against a real kube-apiserver behind kcpproxy with two logical clusters that
// hold the same namespace, the same ConfigMap and a Customization with the same namespace/name,
// each setting a different data.flavor:
//   - with both Customizations in mapper-apiserver's first list, east's per-cluster views
//     (/clusters/<c>) and its all-cluster view show each cluster's ConfigMap with its own
//     cluster's flavor only, and mapper-controller (in kcp mode) writes the status of both
//     Customizations, each in its own cluster, counting its cluster's ConfigMap only;
//   - deleting one cluster's Customization removes its flavor from that cluster's ConfigMap
//     only; re-creating it (seen by watch) brings it back, the other cluster's unchanged.
//
// The Follower's informers must key Customizations by logical cluster as well as
// namespace/name (docs/design.md, "Names"); client-go's informers key
// by namespace/name only, and lose one of the two.
func TestKCPCustomizationsPerCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := startLogicalClustersEnv(t, ctx, lcOptions{clusters: 2, noTargets: true, prepare: func(e *lcEnv) {
		framework.InstallControlCRD(t, ctx, e.source, customization.Resource)
		for _, c := range e.clusters {
			ns := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]interface{}{"name": kcpCustNamespace}}}
			if _, err := e.cluster[c].Resource(namespacesGVR).Create(ctx, ns, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating namespace %s in %s: %v", kcpCustNamespace, c, err)
			}
			if _, err := e.cluster[c].Resource(configMapsGVR).Namespace(kcpCustNamespace).Create(ctx, newConfigMap(kcpCustNamespace, kcpCustObject, kcpCustLocation), metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating ConfigMap in %s: %v", c, err)
			}
			createCustomization(t, ctx, e.customizations(c), flavorCustomization(flavorOf(c, 1)))
		}
	}})
	a, b := env.clusters[0], env.clusters[1]
	// mapper-controller writes the Customizations' status, in kcp mode: it reads the proxy's
	// wildcard endpoint and writes each Customization in its own cluster. Without leader
	// election: the wildcard endpoint takes no Lease.
	framework.StartMapperControllerUnelected(t, env.proxyKubeconfig, append(framework.MapperAPIServerArgs(t, env.server),
		"--source-mode=kcp", "--controllers=customizationstatus", "--view-discovery-interval=1s")...)

	// Each step starts from the state the previous one checked.
	if !t.Run("each cluster's Customization applies to its own cluster only", func(t *testing.T) {
		env.waitFlavors(t, ctx, map[string]string{a: flavorOf(a, 1), b: flavorOf(b, 1)})
		for _, c := range env.clusters {
			st := waitCustomizationCondition(t, ctx, env.customizations(c), kcpCustName,
				controlv1alpha1.CustomizationReady, "True", controlv1alpha1.ReasonAllObjectsRendered)
			if st.SelectedObjects == nil || *st.SelectedObjects != 1 {
				t.Errorf("%s's Customization selects %v (object, location) pairs, want 1: its own cluster's ConfigMap for east", c, st.SelectedObjects)
			}
		}
	}) {
		return
	}

	if !t.Run("deleting one cluster's Customization leaves the other's", func(t *testing.T) {
		if err := env.customizations(a).Delete(ctx, kcpCustName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		env.waitFlavors(t, ctx, map[string]string{a: kcpCustNone, b: flavorOf(b, 1)})
	}) {
		return
	}

	t.Run("a Customization created while running applies to its own cluster only", func(t *testing.T) {
		createCustomization(t, ctx, env.customizations(a), flavorCustomization(flavorOf(a, 2)))
		env.waitFlavors(t, ctx, map[string]string{a: flavorOf(a, 2), b: flavorOf(b, 1)})
		waitCustomizationCondition(t, ctx, env.customizations(a), kcpCustName,
			controlv1alpha1.CustomizationReady, "True", controlv1alpha1.ReasonAllObjectsRendered)
	})
}

// flavorCustomization is Customization apps/flavor: a JSONPatch adding data.flavor=flavor to
// every ConfigMap of its namespace (and logical cluster), for every location.
func flavorCustomization(flavor string) *controlv1alpha1.Customization {
	return &controlv1alpha1.Customization{
		TypeMeta:   metav1.TypeMeta{APIVersion: controlv1alpha1.SchemeGroupVersion.String(), Kind: "Customization"},
		ObjectMeta: metav1.ObjectMeta{Name: kcpCustName, Namespace: kcpCustNamespace},
		Spec: controlv1alpha1.CustomizationSpec{
			Resources: []controlv1alpha1.ResourceRule{{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch, JSONPatch: &admissionregistrationv1.JSONPatch{
				Expression: fmt.Sprintf(`[JSONPatch{op: "add", path: "/data/flavor", value: %q}]`, flavor)}}},
		},
	}
}

// customizations returns the client of cluster's Customizations in kcpCustNamespace, through
// the proxy.
func (e *lcEnv) customizations(cluster string) dynamic.ResourceInterface {
	return e.cluster[cluster].Resource(customization.Resource).Namespace(kcpCustNamespace)
}

// waitFlavors waits until east's view shows, for every cluster, ConfigMap apps/settings with
// data.flavor want[cluster] (kcpCustNone: without it), both on the all-cluster path and on each
// cluster's path.
func (e *lcEnv) waitFlavors(t *testing.T, ctx context.Context, want map[string]string) {
	t.Helper()
	wantText := flavorsText(want)
	mapperEventually(t, ctx, lcViewTimeout, "east's views show the flavors "+wantText, func() (bool, string) {
		var problems []string
		list, err := e.view(t, kcpCustLocation, "").Resource(configMapsGVR).Namespace(kcpCustNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			problems = append(problems, "all-cluster view: "+err.Error())
		} else {
			all := map[string]string{}
			for i := range list.Items {
				all[list.Items[i].GetAnnotations()[contract.ClusterAnnotation]] = flavor(&list.Items[i])
			}
			if got := flavorsText(all); got != wantText {
				problems = append(problems, "all-cluster view: "+got)
			}
		}
		for c := range want {
			obj, err := e.view(t, kcpCustLocation, c).Resource(configMapsGVR).Namespace(kcpCustNamespace).Get(ctx, kcpCustObject, metav1.GetOptions{})
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("view of %s: %v", c, err))
			case obj.GetAnnotations()[contract.ClusterAnnotation] != c:
				problems = append(problems, fmt.Sprintf("view of %s shows the object of cluster %q", c, obj.GetAnnotations()[contract.ClusterAnnotation]))
			case flavor(obj) != want[c]:
				problems = append(problems, fmt.Sprintf("view of %s: flavor %s", c, flavor(obj)))
			}
		}
		sort.Strings(problems)
		return len(problems) == 0, strings.Join(problems, "; ")
	})
}

// flavor returns obj's data.flavor, kcpCustNone when absent.
func flavor(obj *unstructured.Unstructured) string {
	f, ok, _ := unstructured.NestedString(obj.Object, "data", "flavor")
	if !ok {
		return kcpCustNone
	}
	return f
}

// flavorsText prints cluster → flavor sorted by cluster ("c00=c00-v1 c01=<none>").
func flavorsText(m map[string]string) string {
	out := make([]string, 0, len(m))
	for c, f := range m {
		out = append(out, c+"="+f)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
