package app

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	mapperapp "github.com/cluster-mapper/cluster-mapper/pkg/mapper/app"
)

// PushOptions configure push mode: where kubeconfig Secrets are read from, and the settings
// of every in-process mapper, which are cmd/mapper's flags with the prefix --push-mapper-.
type PushOptions struct {
	// SecretNamespace is --push-secret-namespace.
	SecretNamespace string
	// AllowProxyURL is --push-allow-proxy-url.
	AllowProxyURL bool
	// Connection, Run and Heartbeat are cmd/mapper's options of the same names.
	Connection *mapperapp.ConnectionOptions
	Run        *mapperapp.RunOptions
	Heartbeat  *mapperapp.HeartbeatOptions
}

// pushMapperFlagPrefix prefixes cmd/mapper's flags on mapper-controller.
const pushMapperFlagPrefix = "push-mapper-"

// pushMapperSkippedFlags are cmd/mapper's flags that a push mapper takes from elsewhere: the
// view, target and location from the SyncTarget and its Secret, the source and Lease
// namespace from mapper-controller, and the endpoint is mapper-controller's.
var pushMapperSkippedFlags = map[string]bool{
	"view-kubeconfig": true, "target-kubeconfig": true, "location": true, "metrics-bind-address": true,
	"register": true, "source-kubeconfig": true, "lease-namespace": true,
}

// NewPushOptions returns cmd/mapper's defaults and cluster-mapper-system.
func NewPushOptions() *PushOptions {
	return &PushOptions{
		SecretNamespace: contract.ControlNamespace,
		Connection:      mapperapp.NewConnectionOptions(),
		Run:             mapperapp.NewRunOptions(),
		Heartbeat:       mapperapp.NewHeartbeatOptions(),
	}
}

// AddFlags registers --push-secret-namespace and cmd/mapper's flags prefixed with
// --push-mapper- (e.g. --push-mapper-workers, --push-mapper-lease-renew-interval).
func (o *PushOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.SecretNamespace, "push-secret-namespace", o.SecretNamespace, "The only namespace of the source from which kubeconfig Secrets of push-mode SyncTargets (spec.kubeconfigSecretRef) are read.")
	fs.BoolVar(&o.AllowProxyURL, "push-allow-proxy-url", o.AllowProxyURL, "Let kubeconfig Secrets of push-mode SyncTargets name a proxy (proxy-url) that the in-process mapper connects to its target through. Without it such a kubeconfig is refused (Ready=False, KubeconfigInvalid): whoever writes the Secret would choose where mapper-controller connects from inside the control plane's network.")
	mapperFlags := pflag.NewFlagSet("push-mapper", pflag.ContinueOnError)
	o.Connection.AddFlags(mapperFlags)
	o.Run.AddFlags(mapperFlags)
	o.Heartbeat.AddFlags(mapperFlags)
	mapperFlags.VisitAll(func(f *pflag.Flag) {
		if pushMapperSkippedFlags[f.Name] {
			return
		}
		fs.AddFlag(&pflag.Flag{Name: pushMapperFlagPrefix + f.Name, Usage: "Push mode's in-process mappers: cmd/mapper's --" + f.Name + ". " + f.Usage,
			Value: f.Value, DefValue: f.DefValue, NoOptDefVal: f.NoOptDefVal})
	})
}

// Complete sets what push mappers take from mapper-controller: the Lease namespace.
func (o *PushOptions) Complete(leaseNamespace string) {
	o.Heartbeat.Register = true
	o.Heartbeat.LeaseNamespace = leaseNamespace
}

// Validate returns every invalid value (the names are cmd/mapper's, without the prefix).
func (o *PushOptions) Validate() error {
	var errs []error
	if o.SecretNamespace == "" {
		errs = append(errs, errors.New("--push-secret-namespace must not be empty"))
	}
	if err := errors.Join(o.Connection.Validate(), o.Run.Validate(), o.Heartbeat.Validate()); err != nil {
		errs = append(errs, fmt.Errorf("--%s* flags: %w", pushMapperFlagPrefix, err))
	}
	return errors.Join(errs...)
}
