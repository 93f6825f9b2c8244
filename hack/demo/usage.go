package main

import (
	"fmt"
	"io"
	"strings"
	"text/template"
	"time"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// usage is what the demo prints once everything runs.
type usage struct {
	health                                                        string
	source, server, eastView, eastAggregated, westAggregated, dir string
	kubectl, mapper                                               string
	// pluginDir is the directory of kubectl-mapper, for PATH.
	pluginDir string
	mappers   map[string]*framework.Process
	grace     time.Duration
	mirrored  []string
}

// usageText is printed once the demo runs. Scripts read some of its lines: `demo is running`,
// `east's view:`, `through the aggregator:`, `K=<kubectl>` and the kubeconfig directory in the
// `$K --kubeconfig <dir>/...` lines; keep them.
var usageText = template.Must(template.New("usage").Parse(`
Locations (SyncTargets in the source; each location's mapper renews its Lease):
{{.Health}}
cluster-mapper demo is running.
  source kube-apiserver:  {{.Source}}
  mapper-apiserver:       {{.Server}}
  east's view:            {{.EastView}}
  through the aggregator: {{.EastAggregated}}
  mirrored resources:     {{.Mirrored}} (only these are in the views and on the targets)
{{range .Mappers}}  mapper of {{.Location}}:        pid {{.PID}}, log {{.Log}}
{{end}}
Try (kubectl from the testenv):
  K={{.Kubectl}}
  $K --kubeconfig {{.Dir}}/east.kubeconfig get deployments,services,configmaps,secrets -A
  $K --kubeconfig {{.Dir}}/west.kubeconfig get configmaps -A
  $K --kubeconfig {{.Dir}}/east.kubeconfig get deployments -A -w
      # and in another shell, re-assign an object in the source:
  $K --kubeconfig {{.Dir}}/source.kubeconfig annotate -n shop deployment checkout --overwrite kcp.io/assigned-locations='["west"]'
  $K --kubeconfig {{.Dir}}/mapper-apiserver.kubeconfig get locations
  $K --kubeconfig {{.Dir}}/source.kubeconfig get locationbindings -A
      # which locations each namespace may use (hack/demo/bindings.yaml, docs/tenancy.md)
  $K --kubeconfig {{.Dir}}/source.kubeconfig get synctargets -o wide -w
      # and stop a mapper (kill -9 <its pid>, above): its location turns Ready=Unknown within
      # the grace period ({{.Grace}}), and 2 minutes later web's share of it moves to the other

Placement, Customization, StatusCollector and status (docs/placement.md, docs/customization.md, docs/status.md):
  $K --kubeconfig {{.Dir}}/source.kubeconfig get placements,customizations,statuscollectors -A
  $K --kubeconfig {{.Dir}}/east.kubeconfig get deployments -n web -o 'custom-columns=NAME:.metadata.name,REPLICAS:.spec.replicas,REGION:.metadata.labels.demo\.example/region'
      # web's Deployments are divided over east and west by the Placement, and labelled with
      # the location's region by the Customization, as each view renders them
  $K --kubeconfig {{.Dir}}/source.kubeconfig get deployments -A
      # status written back by the locations' mappers: web's is the sum over east and west
      # (kcp.io/status-policy: Summarize); the targets run no kubelet, so Pods stay Pending
  $K --kubeconfig {{.Dir}}/source.kubeconfig get statussummaries -n web
  $K --kubeconfig {{.Dir}}/source.kubeconfig get deployments,configmaps,secrets,serviceaccounts,services -n blog -o 'custom-columns=KIND:.kind,NAME:.metadata.name,LOCATIONS:.metadata.annotations.kcp\.io/assigned-locations'
      # blog's Placement selects only its Deployment; the rest of the application follows it:
      # every object of the app on the same location (docs/dependencies.md)
  $K --kubeconfig {{.Dir}}/source.kubeconfig delete namespace shop
      # its objects leave the views, the mappers delete their copies, the namespace goes away

Through the kube-apiserver aggregator, as the mapper of each location (allowed only its own view):
  $K --kubeconfig {{.Dir}}/source.kubeconfig get apiservice v1alpha1.mapper.kcp.io
  $K --kubeconfig {{.Dir}}/source.kubeconfig get locations
  $K --kubeconfig {{.Dir}}/mapper-east.kubeconfig get deployments -A
  $K --kubeconfig {{.Dir}}/mapper-west.kubeconfig get configmaps -A -w
  $K --kubeconfig {{.Dir}}/mapper-east.kubeconfig --server {{.WestAggregated}} get --raw /apis/apps/v1/deployments
      # Forbidden: west is not east's. (A plain "get deployments" stops at kubectl's discovery,
      # which prints the 403 as "unknown"; --raw shows the server's message.)

The targets, kept equal to their views by the mappers:
  $K --kubeconfig {{.Dir}}/target-east.kubeconfig get deployments,services,configmaps,secrets -A -l kcp.io/location=east
  $K --kubeconfig {{.Dir}}/target-west.kubeconfig get deployments -A -l kcp.io/location=west
  $K --kubeconfig {{.Dir}}/target-east.kubeconfig get configmaps -A -l kcp.io/location=east -w
      # and in another shell, assign a ConfigMap to east or take one away:
  $K --kubeconfig {{.Dir}}/source.kubeconfig annotate -n web configmap frontend-config --overwrite kcp.io/assigned-locations='["east","west"]'
  $K --kubeconfig {{.Dir}}/source.kubeconfig annotate -n shop configmap catalog --overwrite kcp.io/assigned-locations='["west"]'
      # and compare a view with its target, per invariant:
  {{.MapperBin}} verify --view-kubeconfig={{.Dir}}/mapper-east.kubeconfig --target-kubeconfig={{.Dir}}/target-east.kubeconfig

The kubectl plugin (bin/kubectl-mapper; docs/day2.md), as kubectl runs it with bin/ on PATH:
  export PATH={{.PluginDir}}:$PATH
  $K mapper --kubeconfig {{.Dir}}/source.kubeconfig locations -o wide
  $K mapper --kubeconfig {{.Dir}}/source.kubeconfig where deployment/frontend -n web
      # per location: who assigned it (the Placement web), why it did not apply there (its
      # outcome record), its status record, a pending deletion
  $K mapper --kubeconfig {{.Dir}}/source.kubeconfig verify east --target-kubeconfig={{.Dir}}/target-east.kubeconfig

Press Ctrl-C to stop everything.
`))

// printUsage writes the text of usageText for u to w.
func printUsage(w io.Writer, u usage) {
	type mapperLine struct {
		Location, Log string
		PID           int
	}
	var ms []mapperLine
	for _, loc := range locations {
		if p, ok := u.mappers[loc]; ok {
			ms = append(ms, mapperLine{Location: loc, PID: p.PID, Log: p.LogPath})
		}
	}
	err := usageText.Execute(w, map[string]any{
		"Health": strings.TrimRight(u.health, "\n"), "Source": u.source, "Server": u.server,
		"EastView": u.eastView, "EastAggregated": u.eastAggregated, "WestAggregated": u.westAggregated,
		"Mirrored": strings.Join(u.mirrored, ", "), "Mappers": ms, "Kubectl": u.kubectl, "Dir": u.dir,
		"Grace": u.grace, "MapperBin": u.mapper, "PluginDir": u.pluginDir,
	})
	if err != nil {
		fmt.Fprintln(w, "printing the demo's usage:", err)
	}
}
