package apiserver

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/util/cert"
)

// ServingCertFiles are the files [WriteServingCert] writes into a directory, the inputs of the
// secretGenerator in artifacts/kustomization.yaml.
var ServingCertFiles = struct{ Cert, Key, CA string }{Cert: "tls.crt", Key: "tls.key", CA: "ca.crt"}

// ServiceDNSNames returns the DNS names of Service namespace/service that a serving certificate
// for it must hold. The kube-apiserver aggregator verifies <service>.<namespace>.svc: it dials
// the Service with that TLS server name.
func ServiceDNSNames(namespace, service string) []string {
	return []string{
		service + "." + namespace + ".svc",
		service + "." + namespace + ".svc.cluster.local",
		service + "." + namespace,
		service,
	}
}

// WriteServingCert creates a self-signed CA and a serving certificate signed by it for the DNS
// names of Service namespace/service (see [ServiceDNSNames]), valid from an hour ago (for clock
// skew) until validity from now, with client-go's cert.GenerateSelfSignedCertKeyWithOptions
// (RSA 2048; the CA's key is not kept, so rotating means running it again). It writes into dir
// (created with mode 0700 if needed):
//
//   - tls.crt: the serving certificate followed by the CA (mode 0644),
//   - tls.key: the serving key (mode 0600),
//   - ca.crt: the CA alone, the APIService's caBundle (mode 0644).
//
// Existing files are overwritten.
func WriteServingCert(dir, namespace, service string, validity time.Duration) error {
	names := ServiceDNSNames(namespace, service)
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKeyWithOptions(cert.SelfSignedCertKeyOptions{
		Host:         names[0],
		AlternateDNS: names[1:],
		// client-go starts the validity an hour before now and counts MaxAge from there.
		MaxAge: validity + time.Hour,
	})
	if err != nil {
		return fmt.Errorf("generating the serving certificate: %w", err)
	}
	// certPEM is the serving certificate followed by its CA.
	block, rest := pem.Decode(certPEM)
	if block == nil || len(bytes.TrimSpace(rest)) == 0 {
		return fmt.Errorf("generating the serving certificate: no CA certificate after the serving certificate")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{ServingCertFiles.Cert, certPEM, 0o644},
		{ServingCertFiles.Key, keyPEM, 0o600},
		{ServingCertFiles.CA, bytes.TrimLeft(rest, "\n"), 0o644},
	} {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// newServingCertCommand returns the `serving-cert` subcommand, a front end of WriteServingCert.
func newServingCertCommand() *cobra.Command {
	var dir, namespace, service string
	validity := 365 * 24 * time.Hour
	cmd := &cobra.Command{
		Use:   "serving-cert --out-dir=<dir>",
		Short: "Create a serving certificate for the mapper-apiserver Service and the APIService's caBundle",
		Long: "Create a self-signed CA and a serving certificate for the in-cluster DNS names of the mapper-apiserver " +
			"Service (the kube-apiserver aggregator verifies <service>.<namespace>.svc), and write tls.crt, tls.key and " +
			"ca.crt into --out-dir. artifacts/kustomization.yaml turns them into the serving Secret and the APIService's " +
			"caBundle. Use your own PKI (for example cert-manager) instead if you have one.",
		Example:      "  mapper-apiserver serving-cert --out-dir=artifacts/serving-cert",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if validity <= 0 {
				return fmt.Errorf("--validity must be positive")
			}
			if err := WriteServingCert(dir, namespace, service, validity); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s, %s and %s into %s for %v\n",
				ServingCertFiles.Cert, ServingCertFiles.Key, ServingCertFiles.CA, dir, ServiceDNSNames(namespace, service))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "out-dir", "", "Directory to write tls.crt, tls.key and ca.crt into (required).")
	cmd.Flags().StringVar(&namespace, "namespace", "mapper-system", "Namespace of the mapper-apiserver Service.")
	cmd.Flags().StringVar(&service, "service", "mapper-apiserver", "Name of the mapper-apiserver Service.")
	cmd.Flags().DurationVar(&validity, "validity", validity, "How long the CA and the certificate are valid.")
	_ = cmd.MarkFlagRequired("out-dir")
	return cmd
}
