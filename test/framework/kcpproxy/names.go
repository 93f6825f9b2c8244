package kcpproxy

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Separator joins a logical cluster and a namespace into a backing namespace, "<cluster>--<ns>".
// Cluster names never contain it ([ValidateClusterName]), so the first occurrence in a backing
// namespace ends the cluster.
const Separator = "--"

// Wildcard is the cluster segment of kcp's wildcard endpoint, /clusters/*.
const Wildcard = "*"

// ValidateClusterName returns an error unless name is a logical cluster name the proxy can
// store: a DNS-1123 label (lower-case alphanumerics and "-", at most 63 characters) that does
// not contain Separator. kcp's path-like names ("root:org") are not accepted.
func ValidateClusterName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("logical cluster name %q: %s", name, strings.Join(errs, "; "))
	}
	if strings.Contains(name, Separator) {
		return fmt.Errorf("logical cluster name %q contains %q, which kcpproxy uses to join clusters and namespaces", name, Separator)
	}
	return nil
}

// BackingNamespace returns the namespace of the backing kube-apiserver that holds namespace ns
// of cluster, "<cluster>--<ns>". It returns an error when cluster is not valid
// ([ValidateClusterName]), ns is not a namespace name, or the result is longer than a
// namespace name may be (63 characters).
func BackingNamespace(cluster, ns string) (string, error) {
	if err := ValidateClusterName(cluster); err != nil {
		return "", err
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	b := cluster + Separator + ns
	if len(b) > validation.DNS1123LabelMaxLength {
		return "", fmt.Errorf("namespace %q of logical cluster %q: kcpproxy stores it as %q, longer than %d characters", ns, cluster, b, validation.DNS1123LabelMaxLength)
	}
	return b, nil
}

// SplitBackingNamespace returns the logical cluster and namespace stored as the backing
// namespace b, and ok=false when b belongs to no logical cluster (no Separator, or either part
// invalid).
func SplitBackingNamespace(b string) (cluster, ns string, ok bool) {
	cluster, ns, found := strings.Cut(b, Separator)
	if !found || ValidateClusterName(cluster) != nil || len(validation.IsDNS1123Label(ns)) > 0 {
		return "", "", false
	}
	return cluster, ns, true
}
