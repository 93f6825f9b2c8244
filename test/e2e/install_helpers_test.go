package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// containerArgs returns the arguments of the container of the Deployment name in objects.
func containerArgs(t *testing.T, objects []*unstructured.Unstructured, name, container string) []string {
	t.Helper()
	for _, o := range objects {
		if o.GetKind() != "Deployment" || o.GetName() != name {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			c := c.(map[string]interface{})
			if c["name"] != container {
				continue
			}
			args, _, _ := unstructured.NestedStringSlice(c, "args")
			return args
		}
	}
	t.Fatalf("the manifests have no Deployment %s with a container %s", name, container)
	return nil
}

// serveAPIServiceFromLoopback points the installed Service namespace/mapper-apiserver at server,
// which runs on loopback instead of in pods (there is no kubelet), as kube-proxy would point it at
// the pods: it replaces the Service by one of type ExternalName "localhost" with the server's
// port, and sets that port in the APIService, whose caBundle stays the installed one. It waits
// until the APIService is Available through the aggregator and returns it.
func serveAPIServiceFromLoopback(t *testing.T, ctx context.Context, source *framework.ControlPlane, namespace string, server *framework.MapperAPIServer) *framework.APIService {
	t.Helper()
	admin := source.Admin().Client(t)
	port := strings.TrimPrefix(server.URL[strings.LastIndex(server.URL, ":"):], ":")
	if err := admin.CoreV1().Services(namespace).Delete(ctx, "mapper-apiserver", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	if _, err := admin.CoreV1().Services(namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "mapper-apiserver", Namespace: namespace},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost", Ports: []corev1.ServicePort{{Name: "https", Port: int32(p)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src, err := dynamic.NewForConfig(source.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	apiServicesGVR := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	if _, err := src.Resource(apiServicesGVR).Patch(ctx, framework.APIServiceName, types.MergePatchType, []byte(`{"spec":{"service":{"port":`+port+`}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	api := &framework.APIService{ControlPlane: source, Server: server}
	if err := api.WaitAvailable(ctx); err != nil {
		t.Fatalf("%v\nmapper-apiserver log:\n%s", err, server.Process.LogTail(40))
	}
	return api
}
