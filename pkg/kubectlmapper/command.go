package kubectlmapper

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
)

// userAgent is the user agent of the plugin's requests.
const userAgent = "kubectl-mapper"

// NewCommand returns `kubectl mapper` with its subcommands; streams are where they read and
// write. The client flags (--kubeconfig, --context, --server, ...) are those of kubectl
// (genericclioptions.ConfigFlags) and name the source cluster.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	cmd := &cobra.Command{
		Use:         "mapper",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl mapper"},
		Short:       "Find where objects are mapped, list, register and verify locations of cluster-mapper",
		Long: "kubectl mapper reads what mapper-apiserver and mapper-controller report in the source cluster " +
			"(Locations, SyncTargets, the records on source objects) and answers the day-2 questions: which " +
			"locations are healthy, where an object is and why it did not apply there, how to add a location " +
			"and whether a location's target matches its view. See docs/day2.md.",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.SetGlobalNormalizationFunc(cliflag.WordSepNormalizeFunc)
	flags.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(
		newLocationsCommand(flags, streams),
		newWhereCommand(flags, streams),
		newRegisterCommand(flags, streams),
		newVerifyCommand(flags, streams),
	)
	return cmd
}

// ExitError is an error with the exit status the plugin ends with: verify returns one with
// status 2 when it found violations.
type ExitError struct {
	// Code is the exit status.
	Code int
	// Err is what to print.
	Err error
}

// Error returns the message of Err.
func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *ExitError) Unwrap() error { return e.Err }

// Run executes cmd and returns the exit status: 0 on success, the Code of an ExitError, or 1
// on any other error, which it prints to streams.ErrOut as kubectl does ("error: ...").
func Run(cmd *cobra.Command, streams genericiooptions.IOStreams) int {
	err := cmd.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
	var exit *ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	return 1
}

// sourceClients are the clients of the source cluster the flags name.
type sourceClients struct {
	config  *rest.Config
	dynamic dynamic.Interface
	kube    kubernetes.Interface
}

// newSourceClients returns the clients of the source cluster of flags, or the error of
// loading the kubeconfig.
func newSourceClients(flags *genericclioptions.ConfigFlags) (*sourceClients, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = userAgent
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &sourceClients{config: cfg, dynamic: d, kube: k}, nil
}
