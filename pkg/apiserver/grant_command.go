package apiserver

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// newGrantCommand returns the `grant` subcommand: it prints LocationGrant as YAML, or with
// --apply writes it to the cluster of the current kubeconfig.
func newGrantCommand() *cobra.Command {
	var (
		location, kubeconfig          string
		users, groups, serviceAccount []string
		apply, removeExtraSubjects    bool
		shards                        int
	)
	cmd := &cobra.Command{
		Use:   "grant --location=<location> --user=<user>",
		Short: "Print or apply the RBAC a location's mapper needs in the source, and nothing more",
		Long: "Print (or, with --apply, create or update) what one location's mapper identity needs in the source: " +
			"the view rule (locations/proxy get, watch, update, patch), get/update of its own Lease in " +
			LeaseNamespace + " and get/update/patch of its own SyncTarget's status, all restricted to the location " +
			"with resourceNames; plus the namespace and the Lease itself, pre-created, because RBAC cannot restrict " +
			"create by name (a create grant would let a mapper create other locations' Leases). See docs/locations.md.",
		Example: "  mapper-apiserver grant --location=east --service-account=cluster-mapper-system/mapper-east\n" +
			"  mapper-apiserver grant --location=east --user=mapper-east --apply",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			subjects, err := GrantSubjects(users, groups, serviceAccount)
			if err != nil {
				return err
			}
			objects, err := LocationShardsGrant(location, shards, subjects)
			if err != nil {
				return err
			}
			if !apply {
				data, err := GrantYAML(objects)
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				return fmt.Errorf("loading the kubeconfig: %w", err)
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			if err := ApplyGrant(ctx, client, objects, removeExtraSubjects); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "granted location %s to %d subjects (%s)\n", location, len(subjects), GrantName(location))
			return err
		},
	}
	cmd.Flags().StringVar(&location, "location", "", "The location (required).")
	cmd.Flags().IntVar(&shards, "shards", 0, "The number of shards whose mappers share the location (mapper --shard=<index>/<count>): each shard's Lease <location>.<index>-of-<count> is named in the Role and pre-created too. 0: one mapper.")
	cmd.Flags().StringSliceVar(&users, "user", nil, "User names of the mapper's identity.")
	cmd.Flags().StringSliceVar(&groups, "group", nil, "Group names of the mapper's identity.")
	cmd.Flags().StringSliceVar(&serviceAccount, "service-account", nil, "Service accounts of the mapper's identity, as namespace/name.")
	cmd.Flags().BoolVar(&apply, "apply", false, "Create or update the objects in the cluster of the kubeconfig instead of printing them.")
	cmd.Flags().BoolVar(&removeExtraSubjects, "remove-extra-subjects", false, "With --apply: leave the location's bindings with exactly these subjects (by default they are added to the subjects the bindings already have, as kubectl auth reconcile does).")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "With --apply: the kubeconfig of the source. Empty: $KUBECONFIG, then ~/.kube/config.")
	_ = cmd.MarkFlagRequired("location")
	return cmd
}
