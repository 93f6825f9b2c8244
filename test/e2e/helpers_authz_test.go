package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// mapperGroup is the API group of mapper-apiserver (docs/design.md, "Names").
const mapperGroup = "mapper.kcp.io"

var locationsGVR = schema.GroupVersionResource{Group: mapperGroup, Version: "v1alpha1", Resource: "locations"}

// viewRule is the RBAC rule of docs/design.md ("Authorization") for location with verbs, written out
// here rather than taken from the code under test.
func viewRule(location string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{
		APIGroups:     []string{mapperGroup},
		Resources:     []string{"locations/proxy"},
		ResourceNames: []string{location},
		Verbs:         verbs,
	}
}

// grant creates ClusterRole name with rules and a ClusterRoleBinding of the same name to subjects.
func grant(t *testing.T, ctx context.Context, client kubernetes.Interface, name string, rules []rbacv1.PolicyRule, subjects ...rbacv1.Subject) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ClusterRole %s: %v", name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   subjects,
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ClusterRoleBinding %s: %v", name, err)
	}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}
}

func groupSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: name}
}

func serviceAccountSubject(namespace, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
}

// identity is who a SubjectAccessReview asks about.
type identity struct {
	user   string
	groups []string
}

func serviceAccountIdentity(namespace, name string) identity {
	return identity{
		user:   "system:serviceaccount:" + namespace + ":" + name,
		groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
}

// waitForRBAC polls kube-apiserver with SubjectAccessReviews until who may (allowed) or may not
// do verb on the view of location, so that RBAC's informer has seen the bindings before
// mapper-apiserver asks (and caches the answer).
func waitForRBAC(t *testing.T, ctx context.Context, client kubernetes.Interface, who identity, verb, location string, allowed bool) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   who.user,
			Groups: who.groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: mapperGroup, Resource: "locations", Subresource: "proxy", Name: location, Verb: verb,
			},
		}}
		out, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("allowed=%v reason=%q", out.Status.Allowed, out.Status.Reason)
		return out.Status.Allowed == allowed, nil
	})
	if err != nil {
		t.Fatalf("RBAC of %s for %s on the view of %s did not become allowed=%v: %s", who.user, verb, location, allowed, last)
	}
}

// serviceAccountToken creates ServiceAccount namespace/name (if needed) and returns a token for it
// from the TokenRequest API.
func serviceAccountToken(t *testing.T, ctx context.Context, client kubernetes.Interface, namespace, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if _, err := client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating ServiceAccount %s/%s: %v", namespace, name, err)
	}
	expiry := int64(3600)
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// expectForbidden fails the test unless err is a 403 whose message contains every one of want.
func expectForbidden(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: want 403 Forbidden, got %v", what, err)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: the 403 message does not contain %q: %v", what, w, err)
		}
	}
}

// credentials turn a server URL and the CA bundle that verifies it into a client config.
type credentials func(host string, caData []byte) *rest.Config

// certificate authenticates as u with its client certificate.
func certificate(u *framework.User) credentials {
	return func(host string, caData []byte) *rest.Config {
		cfg := u.RESTConfig()
		cfg.Host, cfg.CAData, cfg.QPS = host, caData, -1
		return cfg
	}
}

// bearer authenticates with token.
func bearer(token string) credentials {
	return func(host string, caData []byte) *rest.Config {
		return &rest.Config{Host: host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: caData}, QPS: -1}
	}
}

// anonymous sends no credentials.
func anonymous(host string, caData []byte) *rest.Config {
	return &rest.Config{Host: host, TLSClientConfig: rest.TLSClientConfig{CAData: caData}, QPS: -1}
}

// route is one way to reach mapper-apiserver's API: through the kube-apiserver aggregator or
// straight to the server.
type route struct {
	name string
	// base is the server's root URL and caData the CA bundle that verifies it.
	base   string
	caData []byte
}

// hint is what a 403 for verb on a view says beyond kube-apiserver's standard message: through
// the aggregator, kube-apiserver's own authorization answers (its message names user, verb,
// locations/proxy and the location, nothing more); mapper-apiserver's answer adds the RBAC rule
// that would grant the access.
func (r route) hint(verb string) string {
	if r.name == "aggregated" {
		return "locations/proxy"
	}
	return `verbs ["` + verb + `"]`
}

// groupURL is the mapper.kcp.io/v1alpha1 root on r.
func (r route) groupURL() string { return r.base + "/apis/mapper.kcp.io/v1alpha1" }

// viewURL is location's view on r.
func (r route) viewURL(location string) string {
	return r.groupURL() + "/locations/" + location + "/proxy"
}

// view returns a dynamic client of location's view on r for creds.
func (r route) view(t *testing.T, creds credentials, location string) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(creds(r.viewURL(location), r.caData))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// root returns a dynamic client of r's root (for locations) for creds.
func (r route) root(t *testing.T, creds credentials) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(creds(r.base, r.caData))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
