package apiserver

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/validation"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// LocationKubeconfig returns a kubeconfig for location's view derived from raw: only the context
// contextName (raw's current context when empty), its cluster and its user, with every
// referenced file embedded, and the cluster's server set to <server>/apis/mapper.kcp.io/
// v1alpha1/locations/<location>/proxy. Through a kube-apiserver with the APIService registered,
// that is the aggregated view URL; the credentials stay those of the context's user.
//
// The new cluster and context are named "<context>-location-<location>" and the context is the
// current one. It returns an error when location is not a DNS-1123 label, the context or its
// cluster does not exist, a referenced file cannot be read, or the server already points into a
// location view.
func LocationKubeconfig(raw clientcmdapi.Config, contextName, location string) (*clientcmdapi.Config, error) {
	if errs := validation.ValidateLocationName(location); len(errs) > 0 {
		return nil, fmt.Errorf("invalid location %q: %s", location, strings.Join(errs, "; "))
	}
	cfg := raw.DeepCopy()
	if contextName == "" {
		contextName = cfg.CurrentContext
	}
	if contextName == "" {
		return nil, fmt.Errorf("the kubeconfig has no current context; name one with --context")
	}
	kctx, ok := cfg.Contexts[contextName]
	if !ok {
		return nil, fmt.Errorf("the kubeconfig has no context %q", contextName)
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("context %q names cluster %q, which the kubeconfig does not have", contextName, kctx.Cluster)
	}
	if strings.Contains(cluster.Server, "/apis/"+mapper.GroupName+"/") {
		return nil, fmt.Errorf("the server %q of context %q already points into the %s API; use a kubeconfig of the cluster itself", cluster.Server, contextName, mapper.GroupName)
	}
	cfg.CurrentContext = contextName
	if err := clientcmdapi.MinifyConfig(cfg); err != nil {
		return nil, err
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return nil, fmt.Errorf("embedding the files the kubeconfig references: %w", err)
	}

	name := contextName + "-location-" + location
	viewCluster := cfg.Clusters[kctx.Cluster].DeepCopy()
	viewCluster.Server = strings.TrimSuffix(viewCluster.Server, "/") + contract.ViewPath(location, "")
	viewContext := cfg.Contexts[contextName].DeepCopy()
	viewContext.Cluster = name
	cfg.Clusters = map[string]*clientcmdapi.Cluster{name: viewCluster}
	cfg.Contexts = map[string]*clientcmdapi.Context{name: viewContext}
	cfg.CurrentContext = name
	return cfg, nil
}

// newKubeconfigCommand returns the `kubeconfig` subcommand: it prints LocationKubeconfig of the
// current kubeconfig (the usual $KUBECONFIG / ~/.kube/config, or --kubeconfig).
func newKubeconfigCommand() *cobra.Command {
	var kubeconfig, contextName, location, output string
	cmd := &cobra.Command{
		Use:   "kubeconfig --location=<location>",
		Short: "Print a kubeconfig whose server is a location's view through the kube-apiserver aggregator",
		Long: "Print a kubeconfig for the view of one location, derived from the current kubeconfig: the same " +
			"user and CA, with the server set to <server>" + contract.ViewPath("<location>", "") + ". Against a cluster where the " +
			"APIService v1alpha1.mapper.kcp.io is registered, client-go, informers and kubectl then see only the " +
			"objects assigned to the location. The user needs get (and watch, for informers) on locations/proxy " +
			"with the location as resource name.",
		Example: "  mapper-apiserver kubeconfig --location=east > east.kubeconfig\n" +
			"  kubectl --kubeconfig=east.kubeconfig get deployments -A",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			raw, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).RawConfig()
			if err != nil {
				return fmt.Errorf("loading the kubeconfig: %w", err)
			}
			cfg, err := LocationKubeconfig(raw, contextName, location)
			if err != nil {
				return err
			}
			data, err := clientcmd.Write(*cfg)
			if err != nil {
				return err
			}
			if output != "" {
				return os.WriteFile(output, data, 0o600)
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	cmd.Flags().StringVar(&location, "location", "", "The location whose view the kubeconfig points at (required).")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "The kubeconfig to derive from. Empty: $KUBECONFIG, then ~/.kube/config.")
	cmd.Flags().StringVar(&contextName, "context", "", "The context to derive from. Empty: the current context.")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Write the kubeconfig to this file (mode 0600) instead of stdout.")
	_ = cmd.MarkFlagRequired("location")
	return cmd
}
