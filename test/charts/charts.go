// Package charts renders the Helm charts of charts/ with Helm's own library (helm.sh/helm/v3),
// as `helm template` and `helm install` do, for the chart tests, the install end-to-end test and
// hack/render-artifacts (which writes artifacts/ from the charts, so that kustomize users get the
// same manifests).
package charts

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/client-go/rest"
)

// The charts of charts/.
const (
	// ClusterMapper is the chart installed into the source cluster: mapper-apiserver, its
	// APIService, mapper-controller and the CRDs.
	ClusterMapper = "cluster-mapper"
	// Mapper is the chart installed into a target cluster: one location's mapper (pull mode).
	Mapper = "mapper"
)

// Dir returns the directory of the chart name (ClusterMapper, Mapper) in this repository.
func Dir(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "charts", name)
}

// Release is a chart rendered for one release: what `helm install` would create, in its order.
type Release struct {
	// Chart is the loaded chart.
	Chart *chart.Chart
	// CRDs are the chart's crds/ files, which Helm installs (unrendered) before anything else.
	CRDs []chart.CRD
	// Manifests are the rendered templates split into one object each, in Helm's install order
	// (releaseutil.InstallOrder: namespaces, RBAC, ..., Deployments, APIServices last).
	Manifests []releaseutil.Manifest
	// Notes is the rendered NOTES.txt, empty without one.
	Notes string
}

// Options say how to render a chart.
type Options struct {
	// ReleaseName and Namespace are the release's (helm install <name> -n <namespace>).
	ReleaseName, Namespace string
	// Values override the chart's values.yaml (as -f and --set do); they are checked against
	// the chart's values.schema.json.
	Values map[string]any
	// Config, when set, lets the templates' `lookup` read that cluster, as `helm install` does;
	// without it lookup finds nothing, as in `helm template`.
	Config *rest.Config
	// KubeVersion is the cluster's version the templates see (.Capabilities.KubeVersion); empty:
	// Helm's default.
	KubeVersion string
}

// Render loads the chart in dir and renders it as `helm template` (or, with opts.Config,
// `helm install`) would. It returns an error when the chart does not load, the values do not
// satisfy values.schema.json, or a template fails (including the templates' own `fail` messages
// about bad values).
func Render(dir string, opts Options) (*Release, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", dir, err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	if opts.KubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(opts.KubeVersion)
		if err != nil {
			return nil, err
		}
		caps.KubeVersion = *kv
	}
	values, err := chartutil.ToRenderValues(ch, opts.Values, chartutil.ReleaseOptions{
		Name: opts.ReleaseName, Namespace: opts.Namespace, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, fmt.Errorf("values of chart %s: %w", ch.Name(), err)
	}
	var files map[string]string
	if opts.Config != nil {
		files, err = engine.RenderWithClient(ch, values, opts.Config)
	} else {
		files, err = engine.Render(ch, values)
	}
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", ch.Name(), err)
	}
	r := &Release{Chart: ch, CRDs: ch.CRDObjects()}
	for name, content := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			r.Notes = content
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", ch.Name(), err)
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("chart %s has hooks, which Render does not run", ch.Name())
	}
	r.Manifests = manifests
	return r, nil
}

// YAML returns the manifests as one multi-document YAML stream, CRDs first when withCRDs, in
// install order: what `helm template --include-crds` prints, for `kubectl apply -f -`.
func (r *Release) YAML(withCRDs bool) []byte {
	var b bytes.Buffer
	if withCRDs {
		for _, crd := range r.CRDs {
			fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Filename, bytes.TrimSpace(crd.File.Data))
		}
	}
	for _, m := range r.Manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, strings.TrimSpace(m.Content))
	}
	return b.Bytes()
}

// Lint runs Helm's linter (`helm lint --strict` with values) on the chart in dir and returns
// its messages of severity warning and above (an info, such as "icon is recommended", is not
// returned), sorted.
func Lint(dir, namespace string, values map[string]any) []support.Message {
	l := lint.All(dir, values, namespace, true)
	var out []support.Message
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Error() < out[j].Error() })
	return out
}
