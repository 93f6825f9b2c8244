// Package sourcecluster says how the components that read and write the source find the logical
// cluster of a source object (docs/design.md, "Names": the logical cluster of a source object)
// and reach it: the flags --source-mode, --cluster-name and --source-cluster-path that
// mapper-apiserver and mapper-controller share (Options), and the clients of one logical
// cluster of a kcp source (ClusterClients).
package sourcecluster

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// Source modes (--source-mode).
const (
	// ModePlain is a plain Kubernetes source: one logical cluster, named by --cluster-name; a
	// kcp.io/cluster annotation a user wrote on an object is ignored.
	ModePlain = "plain"
	// ModeKCP is a kcp source read through its wildcard endpoint (the kubeconfig's server ends
	// with /clusters/*): each object's logical cluster is its kcp.io/cluster annotation, and
	// reads by name and writes go to the cluster's own path (--source-cluster-path).
	ModeKCP = "kcp"
)

// Options are the source-mode flags.
type Options struct {
	// Mode is ModePlain (default) or ModeKCP.
	Mode string
	// ClusterName is the logical cluster of every object of a plain source. Unused in kcp
	// mode.
	ClusterName string
	// ClusterPath is, in kcp mode, the path of one logical cluster on the source's server
	// (the kubeconfig's server with a trailing /clusters/* removed); ClusterPlaceholder is
	// replaced by the cluster. Reads by name and writes go there.
	ClusterPath string
}

// NewOptions returns the defaults: a plain source whose one cluster is "default".
func NewOptions() *Options {
	return &Options{Mode: ModePlain, ClusterName: "default", ClusterPath: DefaultClusterPath}
}

// AddFlags registers --source-mode, --cluster-name and --source-cluster-path.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Mode, "source-mode", o.Mode, "How logical clusters are found: \"plain\" (a Kubernetes source, one logical cluster named by --cluster-name; a kcp.io/cluster annotation on an object is ignored) or \"kcp\" (the source kubeconfig points at kcp's wildcard endpoint .../clusters/*; each object's cluster is its kcp.io/cluster annotation, and objects without a valid one are not served).")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "With --source-mode=plain: the logical cluster name of every source object (views show it in kcp.io/cluster).")
	fs.StringVar(&o.ClusterPath, "source-cluster-path", o.ClusterPath, "With --source-mode=kcp: the path of one logical cluster on the source's server (the kubeconfig's server with a trailing /clusters/* removed); "+ClusterPlaceholder+" is replaced by the cluster. Reads by name and writes go there.")
}

// Validate returns every invalid value, naming the flag.
func (o *Options) Validate() error {
	switch o.Mode {
	case ModePlain:
		if err := contract.ValidateClusterName(o.ClusterName); err != nil {
			return fmt.Errorf("--cluster-name: %w", err)
		}
	case ModeKCP:
		if !strings.Contains(o.ClusterPath, ClusterPlaceholder) || !strings.HasPrefix(o.ClusterPath, "/") {
			return fmt.Errorf("--source-cluster-path %q must start with / and contain %s", o.ClusterPath, ClusterPlaceholder)
		}
	default:
		return fmt.Errorf("--source-mode %q is not %q or %q", o.Mode, ModePlain, ModeKCP)
	}
	return nil
}

// KCP reports whether the source is a kcp source.
func (o *Options) KCP() bool { return o.Mode == ModeKCP }

// PlainCluster returns the logical cluster of every object of a plain source, and "" for a
// kcp source (whose objects name theirs in kcp.io/cluster).
func (o *Options) PlainCluster() string {
	if o.KCP() {
		return ""
	}
	return o.ClusterName
}

// Writers returns the clients that write to one logical cluster of the source whose client
// config is cfg: on a plain source cfg's own client for its one cluster; on a kcp source the
// client of the cluster's path (ClusterClients.For). The function returns an error for a
// cluster other than a plain source's, and for an invalid cluster name.
func (o *Options) Writers(cfg *rest.Config) (func(cluster string) (dynamic.Interface, error), error) {
	if o.KCP() {
		clients, err := NewClusterClients(cfg, o.ClusterPath)
		if err != nil {
			return nil, err
		}
		return clients.For, nil
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	plain := o.ClusterName
	return func(cluster string) (dynamic.Interface, error) {
		if cluster != plain {
			return nil, errNotThisCluster(cluster, plain)
		}
		return dyn, nil
	}, nil
}

// errNotThisCluster is the error of a write to another cluster than a plain source's one.
func errNotThisCluster(cluster, plain string) error {
	return errors.New("the plain source holds the logical cluster " + plain + " only, not " + cluster)
}
