package apiserver

import (
	"github.com/spf13/cobra"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// NewCommand returns the mapper-apiserver command: flags, then Complete → Validate → Run until
// SIGTERM or SIGINT.
func NewCommand() *cobra.Command {
	o := NewOptions()
	logOptions := logs.NewOptions()
	cmd := &cobra.Command{
		Use:   "mapper-apiserver",
		Short: "Serve per-location views of a source API server's objects",
		Long: "mapper-apiserver keeps one indexed cache of the source's objects and serves, for every location " +
			"named in their kcp.io/assigned-locations annotation, a read-only Kubernetes API holding only that " +
			"location's objects at /apis/mapper.kcp.io/v1alpha1/locations/<location>/proxy.",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := logsapi.ValidateAndApply(logOptions, nil); err != nil {
				return err
			}
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(genericapiserver.SetupSignalContext())
		},
	}
	o.AddFlags(cmd.Flags())
	logsapi.AddFlags(logOptions, cmd.Flags())
	cmd.AddCommand(newKubeconfigCommand(), newServingCertCommand(), newGrantCommand())
	return cmd
}
