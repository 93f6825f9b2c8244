package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/auth/rbac/reconciliation"
	"sigs.k8s.io/yaml"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/validation"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// LeaseNamespace is the namespace of the control plane's Leases in the source (docs/design.md,
// "Names").
const LeaseNamespace = contract.ControlNamespace

// GrantName returns the name of the ClusterRole, Role and bindings that LocationGrant
// writes for location: cluster-mapper:location:<location>.
func GrantName(location string) string { return "cluster-mapper:location:" + location }

// LocationGrant returns what one location's mapper identity needs in the source, and
// nothing more: a ClusterRole with
//   - the view rule of docs/design.md: locations/proxy get, watch, update, patch;
//   - get, update, patch of its own SyncTarget's status;
//
// a Role in cluster-mapper-system with get and update of its own Lease, their bindings to
// subjects, the namespace, and the Lease itself, pre-created without a holder. Every rule
// names the location in resourceNames. The Lease is pre-created because RBAC cannot
// restrict create by resourceNames (a create request carries no name the authorizer
// sees): a create grant would let one location's mapper create other locations' Leases
// before their mappers do, and so fake their liveness.
//
// The order of the objects is the order to create them in. It returns an error when
// location is not a DNS-1123 label or there are no subjects.
func LocationGrant(location string, subjects []rbacv1.Subject) ([]runtime.Object, error) {
	return LocationShardsGrant(location, 0, subjects)
}

// LocationShardsGrant is LocationGrant for a location shared by shards mappers (mapper
// --shard=<i>/<shards>, docs/mapper.md "Shards"): the Role also names, and the grant
// pre-creates, each shard's Lease <location>.<i>-of-<shards> (contract.ShardLeaseName), which a
// shard renews and its siblings read. shards 0 is LocationGrant; it returns an error for a
// negative count or one above contract.MaxShards.
func LocationShardsGrant(location string, shards int, subjects []rbacv1.Subject) ([]runtime.Object, error) {
	if errs := validation.ValidateLocationName(location); len(errs) > 0 {
		return nil, fmt.Errorf("invalid location %q: %s", location, strings.Join(errs, "; "))
	}
	if len(subjects) == 0 {
		return nil, fmt.Errorf("name at least one subject (--user, --group or --service-account)")
	}
	if shards < 0 || shards > contract.MaxShards {
		return nil, fmt.Errorf("--shards=%d: the count must be in [0, %d]", shards, contract.MaxShards)
	}
	name := GrantName(location)
	names := []string{location}
	leaseNames := []string{location}
	for i := 0; i < shards; i++ {
		leaseNames = append(leaseNames, contract.ShardLeaseName(location, contract.ViewPart{Shard: contract.Shard{Index: i, Count: shards}}))
	}
	labels := map[string]string{"app.kubernetes.io/part-of": "cluster-mapper", "kcp.io/location": location}
	meta := func(ns string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	objects := []runtime.Object{
		&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: LeaseNamespace}},
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: meta(""),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{contract.GroupName}, Resources: []string{contract.LocationsResource + "/" + contract.ProxySubresource}, ResourceNames: names, Verbs: []string{"get", "watch", "update", "patch", "create", "delete"}},
				{APIGroups: []string{controlv1alpha1.GroupName}, Resources: []string{"synctargets/status"}, ResourceNames: names, Verbs: []string{"get", "update", "patch"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: meta(""),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   subjects,
		},
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: meta(LeaseNamespace),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, ResourceNames: leaseNames, Verbs: []string{"get", "update"}},
			},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: meta(LeaseNamespace),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   subjects,
		},
	}
	for _, n := range leaseNames {
		objects = append(objects, &coordinationv1.Lease{
			TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: LeaseNamespace, Labels: labels},
		})
	}
	return objects, nil
}

// GrantSubjects builds RBAC subjects from user names, group names and service accounts
// given as "namespace/name"; it fails on a malformed service account.
func GrantSubjects(users, groups, serviceAccounts []string) ([]rbacv1.Subject, error) {
	var out []rbacv1.Subject
	for _, u := range users {
		out = append(out, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
	}
	for _, g := range groups {
		out = append(out, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g})
	}
	for _, sa := range serviceAccounts {
		ns, name, ok := strings.Cut(sa, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("--service-account %q is not namespace/name", sa)
		}
		out = append(out, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name})
	}
	return out, nil
}

// GrantYAML renders objects as a multi-document YAML stream, for kubectl apply -f.
func GrantYAML(objects []runtime.Object) ([]byte, error) {
	var b bytes.Buffer
	for i, o := range objects {
		data, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}

// ApplyGrant writes objects to the source: the namespace and the Lease are created when
// missing and left alone otherwise (an existing Lease keeps its holder and renew time);
// roles are created or updated to exactly these rules. Bindings are reconciled as
// `kubectl auth reconcile` does (component-helpers' rbac reconciliation): their subjects
// are added to those the binding already has, so granting a location to a second identity
// (a push-mode mapper-controller beside a pull mapper's user) keeps the first; with
// removeExtraSubjects the binding ends with exactly these subjects. It returns the first
// API error.
func ApplyGrant(ctx context.Context, client kubernetes.Interface, objects []runtime.Object, removeExtraSubjects bool) error {
	for _, o := range objects {
		var err error
		switch o := o.(type) {
		case *corev1.Namespace:
			_, err = client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		case *coordinationv1.Lease:
			_, err = client.CoordinationV1().Leases(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		case *rbacv1.ClusterRole:
			err = createOrUpdate(ctx, o, client.RbacV1().ClusterRoles().Create, client.RbacV1().ClusterRoles().Get, client.RbacV1().ClusterRoles().Update)
		case *rbacv1.ClusterRoleBinding:
			err = reconcileBinding(reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: o},
				reconciliation.ClusterRoleBindingClientAdapter{Client: client.RbacV1().ClusterRoleBindings()}, removeExtraSubjects)
		case *rbacv1.Role:
			err = createOrUpdate(ctx, o, client.RbacV1().Roles(o.Namespace).Create, client.RbacV1().Roles(o.Namespace).Get, client.RbacV1().Roles(o.Namespace).Update)
		case *rbacv1.RoleBinding:
			err = reconcileBinding(reconciliation.RoleBindingAdapter{RoleBinding: o},
				reconciliation.RoleBindingClientAdapter{Client: client.RbacV1(), NamespaceClient: client.CoreV1().Namespaces()}, removeExtraSubjects)
		default:
			err = fmt.Errorf("unexpected object %T", o)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// reconcileBinding creates binding or adds its subjects to the existing one (all of them
// replace the existing ones when removeExtraSubjects), through client.
func reconcileBinding(binding reconciliation.RoleBinding, client reconciliation.RoleBindingModifier, removeExtraSubjects bool) error {
	_, err := (&reconciliation.ReconcileRoleBindingOptions{
		RoleBinding:         binding,
		Confirm:             true,
		RemoveExtraSubjects: removeExtraSubjects,
		Client:              client,
	}).Run()
	return err
}

// createOrUpdate creates obj, or, when it exists, updates it at the stored resourceVersion.
func createOrUpdate[T metav1.Object](ctx context.Context, obj T,
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	get func(context.Context, string, metav1.GetOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error)) error {
	_, err := create(ctx, obj, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	live, err := get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	obj.SetResourceVersion(live.GetResourceVersion())
	_, err = update(ctx, obj, metav1.UpdateOptions{})
	return err
}
