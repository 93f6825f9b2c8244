package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/verify"
)

// NewVerifyCommand returns `mapper verify`: compare a view and a target once, print the
// violations per invariant, and exit non-zero when there are any (or when the comparison
// cannot be made; the message on stderr says which).
func NewVerifyCommand() *cobra.Command {
	conn := NewConnectionOptions()
	logOptions := logs.NewOptions()
	var (
		output      string
		skipContent bool
		timeout     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Compare a location's view with the target once and report violations per invariant",
		Long: "verify lists the view and the managed target objects and prints, for each invariant of the design " +
			"(1: every assigned object exists on the target and is up to date; 2: every managed object names its " +
			"source; 3: opted-in status is reflected; 4: no managed object without an assigning source), the " +
			"violations it finds. Up to date means a server-side dry-run of the mapper's apply changes nothing. " +
			"Use the same --namespace-mapping, --cluster-name and --field-manager as the mapper. Exit status: 0 " +
			"without violations, 1 with violations or when the comparison failed.",
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := logsapi.ValidateAndApply(logOptions, nil); err != nil {
				return err
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("--output must be text or json, not %q", output)
			}
			clients, err := conn.Complete("cluster-mapper/mapper-verify")
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			report, err := verify.Run(ctx, VerifyConfig(conn, clients, skipContent))
			if err != nil {
				return fmt.Errorf("verify could not compare the view and the target: %w", err)
			}
			if output == "json" {
				err = report.WriteJSON(cmd.OutOrStdout())
			} else {
				err = report.WriteText(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if report.Total > 0 {
				return fmt.Errorf("%d violations", report.Total)
			}
			return nil
		},
	}
	conn.AddFlags(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text or json.")
	cmd.Flags().BoolVar(&skipContent, "skip-content", false, "Check only that copies exist and are marked, not that they are up to date (no dry-run applies).")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "Give up after this long.")
	logsapi.AddFlags(logOptions, cmd.Flags())
	return cmd
}

// VerifyConfig returns the verify.Config that compares the view and the target of clients
// with the rules of conn (cluster name, field manager), as the mapper of those options maps
// them; skipContent skips the content check (verify.Config.SkipContent). `mapper verify`,
// `kubectl mapper verify` and the heartbeat's verification all run it.
func VerifyConfig(conn *ConnectionOptions, clients *Clients, skipContent bool) verify.Config {
	return verify.Config{
		Location:         clients.Location,
		View:             clients.View,
		Part:             clients.Part,
		Target:           clients.Target,
		Resources:        clients.Resources,
		NamespaceMapping: clients.NamespaceMapping,
		ClusterName:      conn.ClusterName,
		FieldManager:     conn.FieldManager,
		SkipContent:      skipContent,
	}
}
