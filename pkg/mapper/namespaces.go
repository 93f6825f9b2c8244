package mapper

import (
	"context"
	"fmt"
	"sync"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// namespaceConflict is the error of a target namespace that records another origin than the
// one being mapped into it (prefixed mapping only): the mapper does not mix two source
// namespaces in one target namespace.
type namespaceConflict struct {
	namespace, cluster, sourceNamespace string
}

func (e *namespaceConflict) Error() string {
	return fmt.Sprintf("target namespace %s records the origin %s|%s in its %s/%s annotations",
		e.namespace, e.cluster, e.sourceNamespace, contract.SourceClusterAnnotation, contract.SourceNamespaceAnnotation)
}

// namespaces creates target namespaces on demand and remembers those known to exist. The
// namespaces it creates carry contract.LocationLabel and the origin annotations. It never deletes a
// namespace: a namespace may hold objects nobody mapped, and deleting it would delete them.
type namespaces struct {
	client   kubernetes.Interface
	location string

	mu    sync.Mutex
	known map[string]bool
}

func newNamespaces(client kubernetes.Interface, location string) *namespaces {
	return &namespaces{client: client, location: location, known: map[string]bool{}}
}

// ensure makes sure target namespace ns exists for objects of source namespace src.Namespace
// in cluster src.Cluster, under mapping (the one in force). An existing namespace is used as it is, except that with the
// prefixed mapping one that records another origin is a *namespaceConflict. A terminating
// namespace is an error (the apply would fail; it is retried with backoff).
//
// named says that a ResourceMapping's naming gave ns (spec.naming.namespace): such a
// namespace may hold the copies of several source namespaces and clusters by design, so it
// is created with the location label and no origin annotations (each copy names its own
// source), and no origin is checked.
func (n *namespaces) ensure(ctx context.Context, ns string, src SourceRef, mapping NamespaceMapping, named bool) error {
	n.mu.Lock()
	known := n.known[ns]
	n.mu.Unlock()
	if known {
		return nil
	}
	// Create first and read only when it exists already: a new namespace costs one request,
	// not a GET that answers 404 and then a create.
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   ns,
		Labels: map[string]string{contract.LocationLabel: n.location},
		Annotations: map[string]string{
			contract.SourceClusterAnnotation:   src.Cluster,
			contract.SourceNamespaceAnnotation: src.Namespace,
		},
	}}
	if named {
		obj.Annotations = nil
	}
	existing, err := n.client.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, err = n.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	} else if err == nil {
		klog.FromContext(ctx).V(2).Info("Created a target namespace", "namespace", ns, "sourceCluster", src.Cluster, "sourceNamespace", src.Namespace)
	}
	if err != nil {
		return fmt.Errorf("target namespace %s: %w", ns, err)
	}
	if existing.Status.Phase == corev1.NamespaceTerminating {
		return fmt.Errorf("target namespace %s is terminating", ns)
	}
	if mapping == NamespaceMappingPrefixed && !named {
		ann := existing.Annotations
		if c, s := ann[contract.SourceClusterAnnotation], ann[contract.SourceNamespaceAnnotation]; (c != "" || s != "") && (c != src.Cluster || s != src.Namespace) {
			return &namespaceConflict{namespace: ns, cluster: c, sourceNamespace: s}
		}
	}
	n.mu.Lock()
	n.known[ns] = true
	n.mu.Unlock()
	return nil
}

// forget drops ns from the namespaces known to exist (an apply found it missing).
func (n *namespaces) forget(ns string) {
	n.mu.Lock()
	delete(n.known, ns)
	n.mu.Unlock()
}
