package kubectlmapper

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/app"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/verify"
)

// ViolationsExitCode is the exit status of `kubectl mapper verify` when it found violations.
const ViolationsExitCode = 2

// verifyFlags are the flags of `mapper verify` that `kubectl mapper verify` shares (its view
// is the location's view through the source the client flags name).
var verifyFlags = []string{"target-kubeconfig", "namespace-mapping", "cluster-name", "field-manager", "resources", "shard"}

// newVerifyCommand returns `kubectl mapper verify LOCATION`.
func newVerifyCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	conn := app.NewConnectionOptions()
	var (
		output        string
		targetContext string
		skipContent   bool
		timeout       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "verify LOCATION --target-kubeconfig=FILE",
		Short: "Compare a location's view with its target cluster once and report violations per invariant",
		Long: "Run the mapper's invariant check (mapper verify, pkg/mapper/verify) for one location: list the " +
			"location's view, read through the source the client flags name, and the copies on the target cluster " +
			"of --target-kubeconfig, and print the violations of each invariant of docs/design.md. Use the mapper's " +
			"--namespace-mapping, --cluster-name and --field-manager. Exit status: 0 without violations, " +
			fmt.Sprint(ViolationsExitCode) + " with violations, 1 when the comparison could not be made.",
		Example: "  kubectl mapper verify east --target-kubeconfig=east.kubeconfig\n" +
			"  kubectl mapper verify east --target-kubeconfig=east.kubeconfig -o json",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" && output != "yaml" {
				return fmt.Errorf("--output must be text, json or yaml, not %q", output)
			}
			if conn.TargetKubeconfig == "" {
				return fmt.Errorf("--target-kubeconfig is required: the kubeconfig of the location's target cluster")
			}
			source, err := flags.ToRESTConfig()
			if err != nil {
				return err
			}
			rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: conn.TargetKubeconfig}
			target, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: targetContext}).ClientConfig()
			if err != nil {
				return fmt.Errorf("loading --target-kubeconfig: %w", err)
			}
			clients, err := conn.ClientsFor(userAgent, viewConfig(source, args[0]), target)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			report, err := verify.Run(ctx, app.VerifyConfig(conn, clients, skipContent))
			if err != nil {
				return fmt.Errorf("verify could not compare the view and the target: %w", err)
			}
			if err := writeReport(streams, report, output); err != nil {
				return err
			}
			if report.Total > 0 {
				return &ExitError{Code: ViolationsExitCode, Err: fmt.Errorf("%d violations in location %s", report.Total, report.Location)}
			}
			return nil
		},
	}
	fs := pflag.NewFlagSet("mapper", pflag.ContinueOnError)
	conn.AddFlags(fs)
	for _, name := range verifyFlags {
		cmd.Flags().AddFlag(fs.Lookup(name))
	}
	cmd.Flags().Lookup("target-kubeconfig").Usage = "Kubeconfig of the location's target cluster (required)."
	cmd.Flags().StringVar(&targetContext, "target-context", "", "The context of --target-kubeconfig. Empty: its current context.")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text, json or yaml.")
	cmd.Flags().BoolVar(&skipContent, "skip-content", false, "Check only that copies exist and are marked, not that they are up to date (no dry-run applies).")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "Give up after this long.")
	return cmd
}

// viewConfig returns a copy of source whose server is location's view through it:
// <server>/apis/mapper.kcp.io/v1alpha1/locations/<location>/proxy (docs/design.md, "The location
// view"), with the same credentials.
func viewConfig(source *rest.Config, location string) *rest.Config {
	view := rest.CopyConfig(source)
	view.Host = strings.TrimSuffix(view.Host, "/") + contract.ViewPath(location, "")
	view.APIPath = ""
	return view
}

// writeReport prints report as format: text (verify's own), json or yaml.
func writeReport(streams genericiooptions.IOStreams, report *verify.Report, format string) error {
	switch format {
	case "json":
		return report.WriteJSON(streams.Out)
	case "yaml":
		var b bytes.Buffer
		if err := report.WriteJSON(&b); err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(b.Bytes())
		if err != nil {
			return err
		}
		_, err = streams.Out.Write(y)
		return err
	}
	return report.WriteText(streams.Out)
}
