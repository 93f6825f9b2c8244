package framework

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Names of the APIService registration (artifacts/ uses the same ones).
const (
	// APIServiceName is the name of mapper-apiserver's APIService, <version>.<group>.
	APIServiceName = "v1alpha1.mapper.kcp.io"
	// APIServiceNamespace and APIServiceServiceName name the Service the APIService points at.
	APIServiceNamespace   = "mapper-system"
	APIServiceServiceName = "mapper-apiserver"
	// MapperGroupVersion is the group/version mapper-apiserver serves.
	MapperGroupVersion = "mapper.kcp.io/v1alpha1"
)

// APIServiceAvailableTimeout bounds how long [RegisterAPIService] waits for the APIService to be
// Available and the group to appear in the kube-apiserver's discovery.
var APIServiceAvailableTimeout = 2 * time.Minute

var apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// APIServiceServing is the serving certificate the kube-apiserver aggregator verifies when it
// proxies to an aggregated server: the aggregator connects with TLS server name
// <service>.<namespace>.svc (whatever address the Service resolves to) and verifies the
// certificate with the APIService's caBundle.
type APIServiceServing struct {
	// Namespace and Service name the Service of the APIService.
	Namespace, Service string
	// CA is the caBundle of the APIService; it signed Cert.
	CA *CA
	// Cert is a serving certificate for the Service's DNS names.
	Cert *KeyPair
}

// NewAPIServiceServing issues, from a new CA, a serving certificate for the DNS names of Service
// namespace/service (<service>.<namespace>.svc and its longer and shorter forms). It fails the
// test on error.
func NewAPIServiceServing(t TB, namespace, service string) *APIServiceServing {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "apiservice-pki")
	ca := NewCA(t, dir, "apiservice-ca", "mapper-apiserver-apiservice-ca")
	cert := ca.IssueServingCert(t, dir, "apiservice-serving",
		service+"."+namespace+".svc", service+"."+namespace+".svc.cluster.local", service+"."+namespace, service)
	return &APIServiceServing{Namespace: namespace, Service: service, CA: ca, Cert: cert}
}

// Args returns the mapper-apiserver flag that serves Cert by SNI for its DNS names
// (--tls-sni-cert-key), next to the default serving certificate clients of the loopback address
// get. Pass it to [StartMapperAPIServer].
func (s *APIServiceServing) Args() []string {
	return []string{"--tls-sni-cert-key=" + s.Cert.CertFile + "," + s.Cert.KeyFile}
}

// APIService is mapper-apiserver registered with a control plane's aggregator by
// [RegisterAPIService].
type APIService struct {
	// ControlPlane is the kube-apiserver whose aggregator serves the group.
	ControlPlane *ControlPlane
	// Server is the registered mapper-apiserver.
	Server *MapperAPIServer
	// Serving is the certificate the aggregator verifies.
	Serving *APIServiceServing
}

// StartAggregatedMapperAPIServer starts mapper-apiserver mirroring cp like [StartMapperAPIServer]
// (extraArgs appended), with a serving certificate for the default Service names, and registers
// it with cp's aggregator by [RegisterAPIService].
func StartAggregatedMapperAPIServer(t TB, cp *ControlPlane, extraArgs ...string) *APIService {
	t.Helper()
	serving := NewAPIServiceServing(t, APIServiceNamespace, APIServiceServiceName)
	m := StartMapperAPIServer(t, cp, append(serving.Args(), extraArgs...)...)
	return RegisterAPIService(t, cp, m, serving)
}

// RegisterAPIService registers m with cp's aggregator, as an in-cluster deployment would but
// without kube-proxy or endpoints: it creates (or updates) the namespace, a Service of type
// ExternalName with externalName "localhost" and m's port, which the aggregator resolves to
// https://localhost:<port>, and the APIService v1alpha1.mapper.kcp.io with serving.CA as
// caBundle. It waits until the APIService's Available condition is True and cp's discovery lists
// the group, and fails the test with the condition's message otherwise.
func RegisterAPIService(t TB, cp *ControlPlane, m *MapperAPIServer, serving *APIServiceServing) *APIService {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), APIServiceAvailableTimeout)
	defer cancel()
	u, err := url.Parse(m.URL)
	if err != nil {
		t.Fatalf("mapper-apiserver URL %q: %v", m.URL, err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("mapper-apiserver URL %q has no port: %v", m.URL, err)
	}
	client := cp.Admin().Client(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: serving.Namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", serving.Namespace, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: serving.Service, Namespace: serving.Namespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(port)}},
		},
	}
	if old, err := client.CoreV1().Services(serving.Namespace).Get(ctx, svc.Name, metav1.GetOptions{}); err == nil {
		old.Spec = svc.Spec
		_, err = client.CoreV1().Services(serving.Namespace).Update(ctx, old, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("updating Service %s/%s: %v", svc.Namespace, svc.Name, err)
		}
	} else if _, err := client.CoreV1().Services(serving.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Service %s/%s: %v", svc.Namespace, svc.Name, err)
	}

	dyn, err := dynamic.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	apiService := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]interface{}{"name": APIServiceName},
		"spec": map[string]interface{}{
			"group":                "mapper.kcp.io",
			"version":              "v1alpha1",
			"groupPriorityMinimum": int64(1000),
			"versionPriority":      int64(15),
			"caBundle":             base64.StdEncoding.EncodeToString(serving.CA.CertPEM),
			"service": map[string]interface{}{
				"namespace": serving.Namespace,
				"name":      serving.Service,
				"port":      int64(port),
			},
		},
	}}
	apiServices := dyn.Resource(apiServicesGVR)
	if old, err := apiServices.Get(ctx, APIServiceName, metav1.GetOptions{}); err == nil {
		apiService.SetResourceVersion(old.GetResourceVersion())
		if _, err := apiServices.Update(ctx, apiService, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("updating APIService %s: %v", APIServiceName, err)
		}
	} else if _, err := apiServices.Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating APIService %s: %v", APIServiceName, err)
	}

	a := &APIService{ControlPlane: cp, Server: m, Serving: serving}
	if err := a.WaitAvailable(ctx); err != nil {
		t.Fatalf("%v\nmapper-apiserver log:\n%s", err, m.Process.LogTail(logTailLines))
	}
	return a
}

// WaitAvailable waits until the APIService's Available condition is True and the
// kube-apiserver's discovery lists mapper.kcp.io/v1alpha1, or ctx ends. The error names the
// last Available condition seen.
func (a *APIService) WaitAvailable(ctx context.Context) error {
	dyn, err := dynamic.NewForConfig(a.ControlPlane.AdminConfig())
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(a.ControlPlane.AdminConfig())
	if err != nil {
		return err
	}
	last := "no status yet"
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		obj, err := dyn.Resource(apiServicesGVR).Get(ctx, APIServiceName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		cond, ok := AvailableCondition(obj)
		if !ok || cond["status"] != "True" {
			last = fmt.Sprintf("Available=%v reason=%v message=%v", cond["status"], cond["reason"], cond["message"])
			return false, nil
		}
		groups, err := disc.ServerGroups()
		if err != nil {
			last = "discovery: " + err.Error()
			return false, nil
		}
		for _, g := range groups.Groups {
			for _, v := range g.Versions {
				if v.GroupVersion == MapperGroupVersion {
					return true, nil
				}
			}
		}
		last = "the APIService is Available but discovery does not list " + MapperGroupVersion + " yet"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s did not become available: %s", APIServiceName, last)
	}
	return nil
}

// AvailableCondition returns the Available condition of an APIService object (status, reason,
// message as strings), and whether it has one.
func AvailableCondition(apiService *unstructured.Unstructured) (map[string]interface{}, bool) {
	conds, _, _ := unstructured.NestedSlice(apiService.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]interface{}); ok && m["type"] == "Available" {
			return m, true
		}
	}
	return map[string]interface{}{}, false
}

// URL returns the group's base URL through the aggregator, <kube-apiserver>/apis/mapper.kcp.io/v1alpha1.
func (a *APIService) URL() string { return a.ControlPlane.URL + "/apis/" + MapperGroupVersion }

// ViewURL returns the base URL of location's view through the aggregator.
func (a *APIService) ViewURL(location string) string {
	return a.ControlPlane.URL + contract.ViewPath(location, "")
}

// ViewConfig returns a client config for user against location's view through the aggregator,
// without client-side throttling.
func (a *APIService) ViewConfig(u *User, location string) *rest.Config {
	cfg := u.RESTConfig()
	cfg.Host = a.ViewURL(location)
	cfg.QPS = -1
	return cfg
}
