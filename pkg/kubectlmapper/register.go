package kubectlmapper

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/validation"
	"github.com/cluster-mapper/cluster-mapper/pkg/apiserver"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/push"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// registerOptions are the flags of `kubectl mapper register`.
type registerOptions struct {
	location         string
	targetKubeconfig string
	targetContext    string
	push, pull       bool
	labels           string
	serviceAccount   string
	users, groups    []string
	viewKubeconfig   string
	tokenDuration    time.Duration
	mapperCommand    string
}

// newRegisterCommand returns `kubectl mapper register LOCATION --target-kubeconfig=FILE`.
func newRegisterCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &registerOptions{}
	cmd := &cobra.Command{
		Use:   "register LOCATION --target-kubeconfig=FILE [--pull | --push]",
		Short: "Register a location: its SyncTarget, its mapper's grant and credentials; print how to start the mapper",
		Long: "Register a location in the source the client flags name (docs/locations.md, \"Registering a location\"):\n" +
			"  - pull (the default): a ServiceAccount for the mapper (--service-account, default " + contract.ControlNamespace + "/mapper-<location>), " +
			"the grant of `mapper-apiserver grant` for it (the location's view, Lease and SyncTarget status, nothing more), a token " +
			"for it (TokenRequest, --token-duration) in a view kubeconfig (--view-kubeconfig, default <location>-view.kubeconfig), " +
			"and the SyncTarget; it prints the command that starts the mapper next to the target;\n" +
			"  - push: the target kubeconfig, minified and self-contained, in the Secret " + contract.ControlNamespace + "/<location>-kubeconfig " +
			"(the Secret mapper-controller's push controller reads), and the SyncTarget naming it; mapper-controller starts the mapper. " +
			"The grant goes to the identities of --user, --group and --service-account when given (mapper-controller's, " +
			"unless it may already do everything).\n" +
			"An existing SyncTarget is left as it is. The target kubeconfig is checked (its /version answers) first.",
		Example: "  kubectl mapper register north --target-kubeconfig=north.kubeconfig\n" +
			"  kubectl mapper register south --target-kubeconfig=south.kubeconfig --push --labels=region=eu",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.location = args[0]
			if err := o.validate(); err != nil {
				return err
			}
			c, err := newSourceClients(flags)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			return o.run(ctx, c, streams)
		},
	}
	cmd.Flags().StringVar(&o.targetKubeconfig, "target-kubeconfig", "", "Kubeconfig of the location's target cluster (required).")
	cmd.Flags().StringVar(&o.targetContext, "target-context", "", "Push mode: the context of --target-kubeconfig to store. Empty: its current context.")
	cmd.Flags().BoolVar(&o.pull, "pull", false, "Pull mode (the default): the mapper runs next to the target with a view kubeconfig.")
	cmd.Flags().BoolVar(&o.push, "push", false, "Push mode: mapper-controller runs the mapper with the target kubeconfig from a Secret.")
	cmd.Flags().StringVarP(&o.labels, "labels", "l", "", "Labels of the SyncTarget, as k=v,k2=v2 (what Placements select).")
	cmd.Flags().StringVar(&o.serviceAccount, "service-account", "", "The mapper's identity as namespace/name: pull mode creates it if missing and writes its token into the view kubeconfig. Default for pull: "+contract.ControlNamespace+"/mapper-<location>.")
	cmd.Flags().StringSliceVar(&o.users, "user", nil, "Push mode: user names to grant the location to (mapper-controller's identity).")
	cmd.Flags().StringSliceVar(&o.groups, "group", nil, "Push mode: group names to grant the location to.")
	cmd.Flags().StringVar(&o.viewKubeconfig, "view-kubeconfig", "", "Pull mode: where to write the mapper's view kubeconfig (mode 0600). Default: <location>-view.kubeconfig.")
	cmd.Flags().DurationVar(&o.tokenDuration, "token-duration", 365*24*time.Hour, "Pull mode: the requested lifetime of the mapper's token (the source's kube-apiserver may shorten it).")
	cmd.Flags().StringVar(&o.mapperCommand, "mapper-command", "mapper", "Pull mode: the mapper's command in the printed command line (e.g. bin/mapper).")
	return cmd
}

// validate checks the flags that need no cluster.
func (o *registerOptions) validate() error {
	if err := validation.ValidateLocationName(o.location); len(err) > 0 {
		return fmt.Errorf("invalid location %q: %s", o.location, strings.Join(err, "; "))
	}
	if o.targetKubeconfig == "" {
		return fmt.Errorf("--target-kubeconfig is required: the kubeconfig of the location's target cluster")
	}
	if o.push && o.pull {
		return fmt.Errorf("--push and --pull exclude each other")
	}
	if _, err := labels.ConvertSelectorToLabelsMap(o.labels); err != nil {
		return fmt.Errorf("--labels: %w", err)
	}
	if !o.push && o.targetContext != "" {
		return fmt.Errorf("--target-context is for --push: a pull mapper uses the current context of --target-kubeconfig")
	}
	if !o.push && (len(o.users) > 0 || len(o.groups) > 0) {
		return fmt.Errorf("--user and --group are for --push; a pull mapper's identity is --service-account")
	}
	if o.serviceAccount == "" && !o.push {
		o.serviceAccount = contract.ControlNamespace + "/mapper-" + o.location
	}
	if o.viewKubeconfig == "" {
		o.viewKubeconfig = o.location + "-view.kubeconfig"
	}
	return nil
}

// run registers the location in the source of c; it reports each step on streams.Out and
// ends with the mapper's command line (pull) or how mapper-controller takes over (push).
func (o *registerOptions) run(ctx context.Context, c *sourceClients, streams genericiooptions.IOStreams) error {
	target, err := o.loadTarget()
	if err != nil {
		return err
	}
	if err := checkReachable(target); err != nil {
		return fmt.Errorf("the target of --target-kubeconfig does not answer: %w", err)
	}
	subjects, err := apiserver.GrantSubjects(o.users, o.groups, nonEmpty(o.serviceAccount))
	if err != nil {
		return err
	}
	if len(subjects) > 0 {
		objects, err := apiserver.LocationGrant(o.location, subjects)
		if err != nil {
			return err
		}
		if err := apiserver.ApplyGrant(ctx, c.kube, objects, false); err != nil {
			return fmt.Errorf("granting location %s: %w", o.location, err)
		}
		fmt.Fprintf(streams.Out, "granted location %s to %s (%s)\n", o.location, subjectNames(subjects), apiserver.GrantName(o.location))
	} else {
		fmt.Fprintf(streams.Out, "granted location %s to nobody: mapper-controller's identity needs the grant unless it may do everything (--user, --group, --service-account)\n", o.location)
	}
	var secretRef *controlv1alpha1.SecretReference
	if o.push {
		if secretRef, err = o.writeSecret(ctx, c); err != nil {
			return err
		}
		fmt.Fprintf(streams.Out, "wrote the target kubeconfig to Secret %s/%s\n", secretRef.Namespace, secretRef.Name)
	} else {
		if err := o.writeViewKubeconfig(ctx, c); err != nil {
			return err
		}
		fmt.Fprintf(streams.Out, "wrote the mapper's view kubeconfig to %s\n", o.viewKubeconfig)
	}
	created, err := o.createSyncTarget(ctx, c, secretRef)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(streams.Out, "created SyncTarget %s\n", o.location)
	} else {
		fmt.Fprintf(streams.Out, "SyncTarget %s exists; left as it is\n", o.location)
	}
	if o.push {
		fmt.Fprintf(streams.Out, "mapper-controller starts the mapper of %s (push mode); watch it become Ready:\n  kubectl mapper locations %s\n", o.location, o.location)
		return nil
	}
	fmt.Fprintf(streams.Out, "start the mapper next to the target:\n  %s\n", o.MapperCommandLine())
	return nil
}

// MapperCommandLine returns the command line that starts the pull mapper of the location.
func (o *registerOptions) MapperCommandLine() string {
	return MapperCommandLine(o.mapperCommand, o.location, o.viewKubeconfig, o.targetKubeconfig)
}

// MapperCommandLine returns the command line of a pull mapper: command (the mapper binary)
// with --location, --view-kubeconfig and --target-kubeconfig.
func MapperCommandLine(command, location, viewKubeconfig, targetKubeconfig string) string {
	return fmt.Sprintf("%s --location=%s --view-kubeconfig=%s --target-kubeconfig=%s", command, location, viewKubeconfig, targetKubeconfig)
}

// loadTarget returns the raw target kubeconfig, minified to its context.
func (o *registerOptions) loadTarget() (*clientcmdapi.Config, error) {
	raw, err := clientcmd.LoadFromFile(o.targetKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --target-kubeconfig: %w", err)
	}
	if o.targetContext != "" {
		raw.CurrentContext = o.targetContext
	}
	if err := clientcmdapi.MinifyConfig(raw); err != nil {
		return nil, fmt.Errorf("--target-kubeconfig: %w", err)
	}
	return raw, nil
}

// checkReachable asks the target of kc for its /version.
func checkReachable(kc *clientcmdapi.Config) error {
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return err
	}
	cfg.Timeout = 10 * time.Second
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = d.ServerVersion()
	return err
}

// writeSecret stores the target kubeconfig, with every file it names embedded, in the Secret
// <location>-kubeconfig of the control namespace (created or updated) after checking it the
// way mapper-controller's push controller will (push.TargetConfig), and returns its
// reference.
func (o *registerOptions) writeSecret(ctx context.Context, c *sourceClients) (*controlv1alpha1.SecretReference, error) {
	kc, err := o.loadTarget()
	if err != nil {
		return nil, err
	}
	if err := clientcmdapi.FlattenConfig(kc); err != nil {
		return nil, fmt.Errorf("embedding the files --target-kubeconfig names: %w", err)
	}
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: o.location + "-kubeconfig", Namespace: contract.ControlNamespace,
			Labels: map[string]string{"app.kubernetes.io/part-of": "cluster-mapper", contract.LocationLabel: o.location}},
		Data: map[string][]byte{push.DefaultSecretKey: data},
	}
	if _, _, err := push.TargetConfig(secret, push.DefaultSecretKey, false); err != nil {
		return nil, fmt.Errorf("mapper-controller would refuse this target kubeconfig: %w", err)
	}
	if err := ensureNamespace(ctx, c, contract.ControlNamespace); err != nil {
		return nil, err
	}
	secrets := c.kube.CoreV1().Secrets(secret.Namespace)
	if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		live, err := secrets.Get(ctx, secret.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		live.Data = secret.Data
		if _, err := secrets.Update(ctx, live, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	return &controlv1alpha1.SecretReference{Namespace: secret.Namespace, Name: secret.Name}, nil
}

// writeViewKubeconfig creates the pull mapper's ServiceAccount when missing, requests a token
// for it and writes the view kubeconfig: the source's server with the location's view path,
// its CA, the token.
func (o *registerOptions) writeViewKubeconfig(ctx context.Context, c *sourceClients) error {
	ns, name, _ := strings.Cut(o.serviceAccount, "/") // checked by GrantSubjects
	if err := ensureNamespace(ctx, c, ns); err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels: map[string]string{"app.kubernetes.io/part-of": "cluster-mapper", contract.LocationLabel: o.location}}}
	if _, err := c.kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ServiceAccount %s: %w", o.serviceAccount, err)
	}
	seconds := int64(o.tokenDuration / time.Second)
	tr, err := c.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting a token for %s: %w", o.serviceAccount, err)
	}
	kc, err := ViewKubeconfig(c.config, o.location, tr.Status.Token)
	if err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, o.viewKubeconfig)
}

// ViewKubeconfig returns a kubeconfig whose server is location's view through source's server
// (docs/design.md, "The location view"), with source's CA (embedded) and token as the
// credentials. It returns an error when source's CA file cannot be read.
func ViewKubeconfig(source *rest.Config, location, token string) (*clientcmdapi.Config, error) {
	ca := source.CAData
	if len(ca) == 0 && source.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(source.CAFile); err != nil {
			return nil, fmt.Errorf("reading the source's CA: %w", err)
		}
	}
	name := "location-" + location
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: viewConfig(source, location).Host, CertificateAuthorityData: ca,
		InsecureSkipTLSVerify: source.Insecure, TLSServerName: source.ServerName}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return kc, nil
}

// createSyncTarget creates the location's SyncTarget with the labels and, for push mode, the
// Secret reference; it returns false when one exists (it is not changed).
func (o *registerOptions) createSyncTarget(ctx context.Context, c *sourceClients, secretRef *controlv1alpha1.SecretReference) (bool, error) {
	lbls, _ := labels.ConvertSelectorToLabelsMap(o.labels) // checked by validate
	st := &controlv1alpha1.SyncTarget{
		TypeMeta:   metav1.TypeMeta{APIVersion: controlv1alpha1.SchemeGroupVersion.String(), Kind: "SyncTarget"},
		ObjectMeta: metav1.ObjectMeta{Name: o.location, Labels: lbls},
		Spec:       controlv1alpha1.SyncTargetSpec{KubeconfigSecretRef: secretRef},
	}
	u, err := synctarget.ToUnstructured(st)
	if err != nil {
		return false, err
	}
	_, err = c.dynamic.Resource(synctarget.Resource).Create(ctx, u, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("creating SyncTarget %s: %w", o.location, err)
	}
	return true, nil
}

// ensureNamespace creates namespace ns when it does not exist.
func ensureNamespace(ctx context.Context, c *sourceClients, ns string) error {
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return nil
}

// nonEmpty returns s as a slice of one, or none when s is empty.
func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// subjectNames renders subjects for a person: "User a, ServiceAccount ns/b".
func subjectNames(subjects []rbacv1.Subject) string {
	parts := make([]string, 0, len(subjects))
	for _, s := range subjects {
		n := s.Name
		if s.Namespace != "" {
			n = s.Namespace + "/" + n
		}
		parts = append(parts, s.Kind+" "+n)
	}
	return strings.Join(parts, ", ")
}
