package charts

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/component-helpers/auth/rbac/validation"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/cluster-mapper/cluster-mapper/pkg/apiserver"
)

// rendered is a release decoded into typed objects, by kind and namespace/name.
type rendered struct {
	t       *testing.T
	release *Release
	objects map[string]runtime.Object // "<Kind> <namespace>/<name>"
	foreign map[string]map[string]any // kinds without Go types here (cert-manager's), as maps
}

// renderTyped renders the chart and decodes every manifest strictly into its typed object; a
// manifest that does not decode fails the test (kinds of cert-manager.io, which this module has
// no types for, are decoded as maps and listed in foreign).
func renderTyped(t *testing.T, chart string, opts Options) *rendered {
	t.Helper()
	r, err := Render(Dir(chart), opts)
	if err != nil {
		t.Fatal(err)
	}
	out := &rendered{t: t, release: r, objects: map[string]runtime.Object{}, foreign: map[string]map[string]any{}}
	for _, m := range r.Manifests {
		key := m.Head.Kind + " " + namespaced(m.Head.Metadata.Name, objectNamespace(t, m.Content))
		if strings.HasPrefix(m.Head.Version, "cert-manager.io/") {
			var u map[string]any
			if err := yaml.Unmarshal([]byte(m.Content), &u); err != nil {
				t.Fatalf("%s: %v", m.Name, err)
			}
			out.foreign[key] = u
			continue
		}
		obj, err := DecodeTyped([]byte(m.Content))
		if err != nil {
			t.Fatalf("%s (%s) does not decode into its typed object: %v\n%s", m.Name, key, err, m.Content)
		}
		if _, dup := out.objects[key]; dup {
			t.Fatalf("%s is rendered twice", key)
		}
		out.objects[key] = obj
	}
	for _, crd := range r.CRDs {
		if _, err := DecodeTyped(crd.File.Data); err != nil {
			t.Fatalf("CRD %s does not decode: %v", crd.Filename, err)
		}
	}
	return out
}

func objectNamespace(t *testing.T, content string) string {
	var m struct {
		Metadata struct{ Namespace string } `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(content), &m); err != nil {
		t.Fatal(err)
	}
	return m.Metadata.Namespace
}

func namespaced(name, namespace string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// get returns the object of kind named "<namespace>/<name>" (or "<name>"), failing the test when
// it was not rendered.
func get[T runtime.Object](r *rendered, kind, name string) T {
	r.t.Helper()
	obj, ok := r.objects[kind+" "+name]
	if !ok {
		r.t.Fatalf("no %s %s rendered; rendered: %v", kind, name, r.keys())
	}
	return obj.(T)
}

func (r *rendered) has(kind, name string) bool {
	_, ok := r.objects[kind+" "+name]
	return ok
}

func (r *rendered) keys() []string {
	var k []string
	for key := range r.objects {
		k = append(k, key)
	}
	slices.Sort(k)
	return k
}

// container returns the only container of a Deployment.
func container(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("Deployment %s has %d containers, want 1", d.Name, n)
	}
	return d.Spec.Template.Spec.Containers[0]
}

// wantArgs checks that every one of want is an argument of c and none of absent is (by flag).
func wantArgs(t *testing.T, c corev1.Container, want []string, absent ...string) {
	t.Helper()
	for _, a := range want {
		if !slices.Contains(c.Args, a) {
			t.Errorf("container %s has no argument %s; args: %q", c.Name, a, c.Args)
		}
	}
	for _, flag := range absent {
		for _, a := range c.Args {
			if a == flag || strings.HasPrefix(a, flag+"=") {
				t.Errorf("container %s has %s, want none", c.Name, a)
			}
		}
	}
}

// wantCovers checks that rules allow everything in want, with RBAC's own comparison.
func wantCovers(t *testing.T, what string, rules []rbacv1.PolicyRule, want ...rbacv1.PolicyRule) {
	t.Helper()
	if ok, missing := validation.Covers(rules, want); !ok {
		t.Errorf("%s does not allow %v", what, missing)
	}
}

// wantNonRoot checks the pod and container security settings every Deployment of the charts has.
func wantNonRoot(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	p := d.Spec.Template.Spec.SecurityContext
	if p == nil || p.RunAsNonRoot == nil || !*p.RunAsNonRoot || p.RunAsUser == nil || *p.RunAsUser != 65532 {
		t.Errorf("Deployment %s does not run as the non-root user 65532: %+v", d.Name, p)
	}
	c := container(t, d).SecurityContext
	if c == nil || c.ReadOnlyRootFilesystem == nil || !*c.ReadOnlyRootFilesystem || c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
		t.Errorf("Deployment %s's container may write its root filesystem or escalate: %+v", d.Name, c)
	}
}

// verifyServingCert checks that certPEM is valid for the DNS name of the Service
// mapper-apiserver.<namespace>.svc (what the aggregator dials) and chains to caPEM.
func verifyServingCert(t *testing.T, certPEM, caPEM []byte, namespace string) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("the CA is not PEM: %q", caPEM)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatalf("the serving certificate is not PEM: %q", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{
		DNSName: "mapper-apiserver." + namespace + ".svc", Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		t.Errorf("the serving certificate does not verify as the aggregator checks it: %v", err)
	}
}

// mirroredByDefault is the values' default mirroredResources (docs/install.md, "Choose what is
// mirrored").
var mirroredByDefault = []string{"configmaps", "secrets", "services", "serviceaccounts", "persistentvolumeclaims", "pods",
	"deployments.apps", "replicasets.apps", "statefulsets.apps", "daemonsets.apps", "jobs.batch", "cronjobs.batch",
	"horizontalpodautoscalers.autoscaling", "poddisruptionbudgets.policy"}

func TestLint(t *testing.T) {
	for _, c := range []struct {
		chart  string
		values map[string]any
	}{
		{ClusterMapper, nil},
		{ClusterMapper, map[string]any{"servingCert": map[string]any{"mode": "external"}, "controller": map[string]any{"enabled": false}}},
		{Mapper, nil},
		{Mapper, map[string]any{"location": "east", "mappedResources": []any{"configmaps", "deployments.apps"}}},
	} {
		for _, m := range Lint(Dir(c.chart), "mapper-system", c.values) {
			t.Errorf("helm lint --strict %s (values %v): %s", c.chart, c.values, m.Error())
		}
	}
}

// TestClusterMapperDefaults renders charts/cluster-mapper with its defaults, as `helm install
// cluster-mapper charts/cluster-mapper -n mapper-system` does, and checks what docs/install.md
// promises of it.
func TestClusterMapperDefaults(t *testing.T) {
	r := renderTyped(t, ClusterMapper, Options{ReleaseName: "cluster-mapper", Namespace: "mapper-system"})

	d := get[*appsv1.Deployment](r, "Deployment", "mapper-system/mapper-apiserver")
	if *d.Spec.Replicas != 2 || d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("mapper-apiserver: %d replicas, maxUnavailable %v; want 2 and 0", *d.Spec.Replicas, d.Spec.Strategy.RollingUpdate.MaxUnavailable)
	}
	c := container(t, d)
	if c.Image != "cluster-mapper/mapper-apiserver:latest" {
		t.Errorf("image %s", c.Image)
	}
	wantArgs(t, c, []string{"--resources=" + strings.Join(mirroredByDefault, ","), "--source-mode=plain", "--cluster-name=default",
		"--tls-cert-file=/var/run/mapper-apiserver/serving-cert/tls.crt"}, "--source-kubeconfig")
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("mapper-apiserver is not ready by /readyz (source-cache-synced): %+v", c.ReadinessProbe)
	}
	wantNonRoot(t, d)

	// The serving certificate is generated, valid for the Service's name, and the APIService
	// trusts its CA.
	s := get[*corev1.Secret](r, "Secret", "mapper-system/mapper-apiserver-serving-cert")
	verifyServingCert(t, s.Data["tls.crt"], s.Data["ca.crt"], "mapper-system")
	as := get[*apiregistrationv1.APIService](r, "APIService", "v1alpha1.mapper.kcp.io")
	if string(as.Spec.CABundle) != string(s.Data["ca.crt"]) || as.Spec.InsecureSkipTLSVerify {
		t.Errorf("the APIService's caBundle is not the serving CA (insecureSkipTLSVerify %v)", as.Spec.InsecureSkipTLSVerify)
	}
	if svc := as.Spec.Service; svc == nil || svc.Namespace != "mapper-system" || svc.Name != "mapper-apiserver" || *svc.Port != 443 {
		t.Errorf("APIService service %+v", as.Spec.Service)
	}
	get[*corev1.Service](r, "Service", "mapper-system/mapper-apiserver")
	if pdb := get[*policyv1.PodDisruptionBudget](r, "PodDisruptionBudget", "mapper-system/mapper-apiserver"); pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PDB minAvailable %v", pdb.Spec.MinAvailable)
	}

	// Delegated authentication and authorization, and what the server does in the source.
	if b := get[*rbacv1.ClusterRoleBinding](r, "ClusterRoleBinding", "mapper-apiserver:system:auth-delegator"); b.RoleRef.Name != "system:auth-delegator" || b.Subjects[0].Namespace != "mapper-system" {
		t.Errorf("auth-delegator binding %+v", b)
	}
	if b := get[*rbacv1.RoleBinding](r, "RoleBinding", "kube-system/mapper-apiserver-auth-reader"); b.RoleRef.Name != "extension-apiserver-authentication-reader" {
		t.Errorf("auth reader binding %+v", b)
	}
	role := get[*rbacv1.ClusterRole](r, "ClusterRole", "mapper-apiserver")
	wantCovers(t, "ClusterRole mapper-apiserver", role.Rules,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "services", "serviceaccounts"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments/status"}, Verbs: []string{"get", "update", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"control.mapper.kcp.io"}, Resources: []string{"synctargets", "customizations"}, Verbs: []string{"list", "watch"}},
		// DeletionPending, and refused renderings.
		rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}},
	)
	if ok, _ := validation.Covers(role.Rules, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"endpoints"}, Verbs: []string{"list"}}}); ok {
		t.Error("ClusterRole mapper-apiserver may list Endpoints, which are not mirrored")
	}

	// mapper-controller: leader election, its Role in the Lease namespace.
	cd := get[*appsv1.Deployment](r, "Deployment", "mapper-system/mapper-controller")
	wantArgs(t, container(t, cd), []string{"--leader-elect=true", "--location-grace-period=40s", "--source-mode=plain", "--cluster-name=default"}, "--kubeconfig")
	wantNonRoot(t, cd)
	get[*corev1.Namespace](r, "Namespace", "cluster-mapper-system")
	cr := get[*rbacv1.Role](r, "Role", "cluster-mapper-system/cluster-mapper:mapper-controller")
	wantCovers(t, "mapper-controller's Role", cr.Rules, rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}})
	if rb := get[*rbacv1.RoleBinding](r, "RoleBinding", "cluster-mapper-system/cluster-mapper:mapper-controller"); rb.Subjects[0].Namespace != "mapper-system" {
		t.Errorf("mapper-controller's RoleBinding binds %+v", rb.Subjects)
	}
	ccr := get[*rbacv1.ClusterRole](r, "ClusterRole", "cluster-mapper:mapper-controller")
	wantCovers(t, "mapper-controller's ClusterRole", ccr.Rules,
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"}, Verbs: []string{"list", "watch", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "serviceaccounts", "persistentvolumeclaims"}, Verbs: []string{"list", "watch", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"control.mapper.kcp.io"}, Resources: []string{"synctargets/status"}, Verbs: []string{"update", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"control.mapper.kcp.io"}, Resources: []string{"placements/status"}, Verbs: []string{"update", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"control.mapper.kcp.io"}, Resources: []string{"dependencyrules"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"control.mapper.kcp.io"}, Resources: []string{"dependencyrules/status"}, Verbs: []string{"update"}},
		// Status records folded into .status; the status of Customizations from `locations`.
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments/status"}, Verbs: []string{"update"}},
		rbacv1.PolicyRule{APIGroups: []string{"control.mapper.kcp.io"}, Resources: []string{"customizations/status"}, Verbs: []string{"update"}},
		rbacv1.PolicyRule{APIGroups: []string{"mapper.kcp.io"}, Resources: []string{"locations"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"mapper.kcp.io"}, Resources: []string{"locations/proxy"}, Verbs: []string{"get"}},
	)

	// The CRDs are artifacts/crds' (controller-gen's output), byte for byte.
	if len(r.release.CRDs) == 0 {
		t.Fatal("the chart has no CRDs")
	}
	artifacts, _ := filepath.Glob(filepath.Join(Dir(ClusterMapper), "..", "..", "artifacts", "crds", "*.yaml"))
	if len(artifacts) != len(r.release.CRDs) {
		t.Errorf("the chart has %d CRDs, artifacts/crds %d (make codegen copies them)", len(r.release.CRDs), len(artifacts))
	}
	for _, crd := range r.release.CRDs {
		want, err := os.ReadFile(filepath.Join(Dir(ClusterMapper), "..", "..", "artifacts", "crds", filepath.Base(crd.Filename)))
		if err != nil || string(want) != string(crd.File.Data) {
			t.Errorf("chart CRD %s differs from artifacts/crds (make codegen copies them): %v", crd.Filename, err)
		}
	}
}

// TestClusterMapperValues renders charts/cluster-mapper with every value changed that
// docs/install.md names: images, replicas, resources, mirrored resources, a kcp source from a
// kubeconfig Secret, a serving certificate from files, no PDB, no mapper-controller.
func TestClusterMapperValues(t *testing.T) {
	dir := t.TempDir()
	if err := apiserver.WriteServingCert(dir, "cm", "mapper-apiserver", time.Hour); err != nil {
		t.Fatal(err)
	}
	files := map[string]any{}
	for key, file := range map[string]string{"tlsCrt": "tls.crt", "tlsKey": "tls.key", "caCrt": "ca.crt"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		files[key] = string(b)
	}
	r := renderTyped(t, ClusterMapper, Options{ReleaseName: "cm", Namespace: "cm", Values: map[string]any{
		"image":             map[string]any{"prefix": "registry.example/cm", "tag": "v1.2.3", "pullSecrets": []any{"pull"}},
		"mirroredResources": []any{"configmaps", "widgets.example.com"},
		"source":            map[string]any{"mode": "kcp", "clusterPath": "https://kcp.example/clusters/{cluster}", "kubeconfigSecret": map[string]any{"name": "kcp"}},
		"apiserver": map[string]any{
			"replicas": 3, "extraArgs": []any{"--max-watches-per-user=5"}, "podDisruptionBudget": map[string]any{"enabled": false},
			"resources": map[string]any{"limits": map[string]any{"memory": "8Gi"}},
		},
		"servingCert": map[string]any{"mode": "files", "files": files},
		"controller":  map[string]any{"enabled": false},
	}})
	d := get[*appsv1.Deployment](r, "Deployment", "cm/mapper-apiserver")
	c := container(t, d)
	if *d.Spec.Replicas != 3 || c.Image != "registry.example/cm/mapper-apiserver:v1.2.3" || d.Spec.Template.Spec.ImagePullSecrets[0].Name != "pull" {
		t.Errorf("replicas %d, image %s, pull secrets %v", *d.Spec.Replicas, c.Image, d.Spec.Template.Spec.ImagePullSecrets)
	}
	// Helm merges maps: the limit given replaces the default one, the default requests stay.
	if c.Resources.Limits.Memory().String() != "8Gi" || c.Resources.Requests.Memory().String() != "256Mi" {
		t.Errorf("resources %v, want the limit of the values and the default requests", c.Resources)
	}
	wantArgs(t, c, []string{"--resources=configmaps,widgets.example.com", "--source-mode=kcp",
		"--source-cluster-path=https://kcp.example/clusters/{cluster}", "--source-kubeconfig=/etc/cluster-mapper/source/kubeconfig",
		"--max-watches-per-user=5"}, "--cluster-name")
	if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "kcp" }) {
		t.Errorf("the source kubeconfig Secret is not mounted: %+v", d.Spec.Template.Spec.Volumes)
	}
	s := get[*corev1.Secret](r, "Secret", "cm/mapper-apiserver-serving-cert")
	if string(s.Data["tls.crt"]) != files["tlsCrt"] || string(s.Data["ca.crt"]) != files["caCrt"] {
		t.Error("the serving-cert Secret does not hold the files given")
	}
	if as := get[*apiregistrationv1.APIService](r, "APIService", "v1alpha1.mapper.kcp.io"); string(as.Spec.CABundle) != files["caCrt"] || as.Spec.Service.Namespace != "cm" {
		t.Errorf("the APIService trusts another CA or names service %+v", as.Spec.Service)
	}
	wantCovers(t, "ClusterRole mapper-apiserver", get[*rbacv1.ClusterRole](r, "ClusterRole", "mapper-apiserver").Rules,
		rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"widgets", "widgets/status"}, Verbs: []string{"get", "update", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: []string{"list", "watch"}})
	for _, absent := range []string{"PodDisruptionBudget cm/mapper-apiserver", "Deployment cm/mapper-controller", "Namespace cluster-mapper-system", "ClusterRole cluster-mapper:mapper-controller"} {
		if _, ok := r.objects[absent]; ok {
			t.Errorf("%s is rendered although the values turn it off", absent)
		}
	}
}

// TestClusterMapperServingCertModes checks the other ways the APIService gets its caBundle:
// cert-manager's CA injector, an existing Secret with the CA given, and none (kustomize's
// replacements fill it in artifacts/).
func TestClusterMapperServingCertModes(t *testing.T) {
	r := renderTyped(t, ClusterMapper, Options{ReleaseName: "cm", Namespace: "mapper-system", Values: map[string]any{"servingCert": map[string]any{"mode": "certManager"}}})
	as := get[*apiregistrationv1.APIService](r, "APIService", "v1alpha1.mapper.kcp.io")
	if as.Annotations["cert-manager.io/inject-ca-from"] != "mapper-system/mapper-apiserver-serving-cert" || len(as.Spec.CABundle) != 0 {
		t.Errorf("certManager: APIService annotations %v, caBundle %d bytes", as.Annotations, len(as.Spec.CABundle))
	}
	cert, ok := r.foreign["Certificate mapper-system/mapper-apiserver-serving-cert"]
	if !ok {
		t.Fatalf("certManager: no serving Certificate; rendered %v", r.foreign)
	}
	spec := cert["spec"].(map[string]any)
	if spec["secretName"] != "mapper-apiserver-serving-cert" || !slices.Contains(spec["dnsNames"].([]any), any("mapper-apiserver.mapper-system.svc")) {
		t.Errorf("certManager: serving Certificate spec %v", spec)
	}
	for _, k := range []string{"Issuer mapper-system/mapper-apiserver-selfsigned", "Certificate mapper-system/mapper-apiserver-ca", "Issuer mapper-system/mapper-apiserver-ca"} {
		if _, ok := r.foreign[k]; !ok {
			t.Errorf("certManager: no %s", k)
		}
	}
	if r.has("Secret", "mapper-system/mapper-apiserver-serving-cert") {
		t.Error("certManager: the chart renders the Secret cert-manager writes")
	}

	r = renderTyped(t, ClusterMapper, Options{ReleaseName: "cm", Namespace: "mapper-system", Values: map[string]any{"servingCert": map[string]any{"mode": "secret", "caBundle": "CA PEM"}}})
	if as := get[*apiregistrationv1.APIService](r, "APIService", "v1alpha1.mapper.kcp.io"); string(as.Spec.CABundle) != "CA PEM" || r.has("Secret", "mapper-system/mapper-apiserver-serving-cert") {
		t.Errorf("secret: caBundle %q; the Secret is the user's, not the chart's", as.Spec.CABundle)
	}

	r = renderTyped(t, ClusterMapper, Options{ReleaseName: "cm", Namespace: "mapper-system", Values: map[string]any{"servingCert": map[string]any{"mode": "external"}}})
	if as := get[*apiregistrationv1.APIService](r, "APIService", "v1alpha1.mapper.kcp.io"); len(as.Spec.CABundle) != 0 || r.has("Secret", "mapper-system/mapper-apiserver-serving-cert") {
		t.Error("external: the chart renders a caBundle or a Secret")
	}
}

// TestBadValues checks that values the charts cannot use fail the render with a message that
// says what to do, instead of rendering something that breaks in the cluster.
func TestBadValues(t *testing.T) {
	for _, c := range []struct {
		chart  string
		values map[string]any
		want   string
	}{
		{ClusterMapper, map[string]any{"servingCert": map[string]any{"mode": "files"}}, "mapper-apiserver serving-cert --namespace=mapper-system"},
		{ClusterMapper, map[string]any{"servingCert": map[string]any{"mode": "secret"}}, "set servingCert.caBundle"},
		{ClusterMapper, map[string]any{"servingCert": map[string]any{"mode": "selfsigned"}}, "at '/servingCert/mode': value must be one of 'generate', 'files', 'secret', 'certManager', 'external'"},
		{ClusterMapper, map[string]any{"source": map[string]any{"mode": "kcp"}}, "needs source.kubeconfigSecret.name"},
		{ClusterMapper, map[string]any{"source": map[string]any{"mode": "Plain"}}, "at '/source/mode'"},
		{ClusterMapper, map[string]any{"apiserver": map[string]any{"replicas": "two"}}, "at '/apiserver/replicas': got string, want integer"},
		{ClusterMapper, map[string]any{"apiserver": map[string]any{"replica": 3}}, "replica"},
		{ClusterMapper, map[string]any{"mirroredResources": []any{"Deployments.apps"}}, "mirroredResources"},
		{Mapper, map[string]any{"location": "East"}, "location"},
		{Mapper, map[string]any{"namespaceMapping": "flat"}, "namespaceMapping"},
	} {
		_, err := Render(Dir(c.chart), Options{ReleaseName: "r", Namespace: "mapper-system", Values: c.values})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with %v: error %v, want one that says %q", c.chart, c.values, err, c.want)
		}
	}
}

// TestMapper renders charts/mapper as docs/install.md installs it for location east: with the
// view kubeconfig given as content (the chart makes the Secret) and the mapped resources narrowed.
func TestMapper(t *testing.T) {
	r := renderTyped(t, Mapper, Options{ReleaseName: "mapper", Namespace: "cluster-mapper"})
	d := get[*appsv1.Deployment](r, "Deployment", "cluster-mapper/mapper")
	c := container(t, d)
	wantArgs(t, c, []string{"--view-kubeconfig=/etc/mapper/view/kubeconfig", "--leader-elect=true", "--namespace-mapping=auto", "--register=true"}, "--resources", "--location", "--target-kubeconfig")
	wantNonRoot(t, d)
	if v := d.Spec.Template.Spec.Volumes[0]; v.Secret == nil || v.Secret.SecretName != "mapper-view-kubeconfig" {
		t.Errorf("the view kubeconfig volume is %+v", v)
	}
	if r.has("Secret", "cluster-mapper/mapper-view-kubeconfig") {
		t.Error("the chart renders the view kubeconfig Secret without content")
	}
	wantCovers(t, "ClusterRole cluster-mapper:mapper", get[*rbacv1.ClusterRole](r, "ClusterRole", "cluster-mapper:mapper").Rules,
		rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}})
	wantCovers(t, "the mapper's leader election Role", get[*rbacv1.Role](r, "Role", "cluster-mapper/cluster-mapper:mapper-leader-election").Rules,
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}})

	r = renderTyped(t, Mapper, Options{ReleaseName: "mapper-east", Namespace: "cluster-mapper", Values: map[string]any{
		"location": "east", "replicas": 1, "mappedResources": []any{"configmaps", "deployments.apps"},
		"viewKubeconfig": map[string]any{"content": "apiVersion: v1\nkind: Config\n", "secretName": "east-view"},
	}})
	d = get[*appsv1.Deployment](r, "Deployment", "cluster-mapper/mapper-east")
	wantArgs(t, container(t, d), []string{"--location=east", "--resources=configmaps,deployments.apps"})
	if *d.Spec.Replicas != 1 || d.Spec.Template.Spec.ServiceAccountName != "mapper-east" {
		t.Errorf("replicas %d, service account %s", *d.Spec.Replicas, d.Spec.Template.Spec.ServiceAccountName)
	}
	if s := get[*corev1.Secret](r, "Secret", "cluster-mapper/east-view"); string(s.Data["kubeconfig"]) != "apiVersion: v1\nkind: Config\n" {
		t.Errorf("view kubeconfig Secret %q", s.Data["kubeconfig"])
	}
	rules := get[*rbacv1.ClusterRole](r, "ClusterRole", "cluster-mapper:mapper-east").Rules
	wantCovers(t, "ClusterRole cluster-mapper:mapper-east", rules,
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "patch", "delete"}})
	if ok, _ := validation.Covers(rules, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}}}); ok {
		t.Error("a mapper narrowed to configmaps and deployments may create Secrets")
	}
}

// TestArtifactsAreRendered checks that artifacts/ holds what the charts render for kustomize
// (and the chart the CRDs of artifacts/crds): `make codegen` writes them, and an edit of one
// without the other fails here.
func TestArtifactsAreRendered(t *testing.T) {
	root := filepath.Join(Dir(ClusterMapper), "..", "..")
	files, err := Artifacts(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s is not what the chart renders (run `make codegen`): %v", name, err)
		}
	}
	stale, err := StaleArtifacts(root, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 {
		t.Errorf("generated files no chart renders any more (run `make codegen`): %v", stale)
	}
}
