package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestKubectlTablesMatchKubeAPIServer proves that `kubectl get <kind> -A` and `-o wide` print the
// same columns and values through a location view as against the source kube-apiserver for the
// same objects (its label-selector twin), AGE aside, for every kind TestMapperTransform mirrors:
// built-in kinds through kube-apiserver's own printers, the custom resource through its CRD's
// printer columns (docs/design.md, "The location view": Table output identical to kube-apiserver's).
func TestKubectlTablesMatchKubeAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	src := dynamicClientFor(t, source)
	ensureNamespace(t, ctx, src, "apps")
	createCRD(t, ctx, src, "widgets", "Widget")

	// Every fixture, assigned to east. The namespace also holds objects the source made and
	// did not assign (kube-root-ca.crt), which neither side prints.
	var gvrs []schema.GroupVersionResource
	seen := map[schema.GroupVersionResource]bool{}
	for _, c := range mapperTransformCases(nil) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(c.yaml), &obj.Object); err != nil {
			t.Fatal(err)
		}
		gv, _ := schema.ParseGroupVersion(obj.GetAPIVersion())
		gvr := gv.WithResource(c.resource)
		if !seen[gvr] {
			seen[gvr] = true
			gvrs = append(gvrs, gvr)
		}
		setAssignment(obj, "east")
		created, err := src.Resource(gvr).Namespace("apps").Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating %s apps/%s: %v", gvr.Resource, obj.GetName(), err)
		}
		if gvr.Resource == "widgets" {
			created.Object["status"] = map[string]interface{}{"phase": "Ready"}
			if _, err := src.Resource(gvr).Namespace("apps").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	server := framework.StartMapperAPIServer(t, source, "--source-discovery-interval=1s")
	admin := source.Admin()
	t.Logf("mapper-apiserver (pid %d) after readyz: process_resident_memory_bytes %.1f MiB",
		server.Process.PID, server.Metric(t, admin, "process_resident_memory_bytes", "")/(1<<20))
	view, err := dynamic.NewForConfig(server.ViewConfig(admin, "east"))
	if err != nil {
		t.Fatal(err)
	}
	for _, gvr := range gvrs {
		waitViewHasSourceVersions(t, ctx, src, view, gvr)
	}

	viewKC := admin.KubeconfigFor(t, server.ViewURL("east"), server.ServingCA.CertPEM)
	sourceKC := source.AdminKubeconfig()
	for _, gvr := range gvrs {
		resource := gvr.GroupResource().String()
		for _, wide := range []bool{false, true} {
			args := []string{"get", resource, "-A"}
			if wide {
				args = append(args, "-o", "wide")
			}
			name := strings.Join(args, " ")
			t.Run(name, func(t *testing.T) {
				want, err := framework.RunKubectl(t, sourceKC, append(args, "-l", locationLabelPrefix+"east")...)
				if err != nil {
					t.Fatal(err)
				}
				got, err := framework.RunKubectl(t, viewKC, args...)
				if err != nil {
					t.Fatal(err)
				}
				wantHeader, wantRows := parseKubectlTable(t, want)
				gotHeader, gotRows := parseKubectlTable(t, got)
				if len(wantRows) == 0 {
					t.Fatalf("kube-apiserver printed no row for the assigned objects:\n%s", want)
				}
				if strings.Join(gotHeader, "|") != strings.Join(wantHeader, "|") {
					t.Fatalf("columns differ:\nview:           %q\nkube-apiserver: %q\nview output:\n%s\nkube-apiserver output:\n%s", gotHeader, wantHeader, got, want)
				}
				if len(gotRows) != len(wantRows) {
					t.Fatalf("%d rows through the view, kube-apiserver prints %d:\nview:\n%s\nkube-apiserver:\n%s", len(gotRows), len(wantRows), got, want)
				}
				for i := range wantRows {
					if strings.Join(gotRows[i], "|") != strings.Join(wantRows[i], "|") {
						t.Errorf("row %d differs:\nview:           %q\nkube-apiserver: %q", i, gotRows[i], wantRows[i])
					}
				}
				if t.Failed() {
					t.Logf("view output:\n%s\nkube-apiserver output:\n%s", got, want)
				} else {
					t.Logf("view and kube-apiserver print:\n%s", got)
				}
			})
		}
	}
}

// waitViewHasSourceVersions waits until the view lists exactly the source's objects of gvr
// assigned to east, each at the source's resourceVersion, so that both print the same state.
func waitViewHasSourceVersions(t *testing.T, ctx context.Context, src, view dynamic.Interface, gvr schema.GroupVersionResource) {
	t.Helper()
	versions := func(d dynamic.Interface, selector string) (map[string]string, error) {
		list, err := d.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, i := range list.Items {
			out[i.GetNamespace()+"/"+i.GetName()] = i.GetResourceVersion()
		}
		return out, nil
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		want, err := versions(src, locationLabelPrefix+"east")
		if err != nil {
			return false, err
		}
		got, err := versions(view, "")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("view %v, source %v", got, want)
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	})
	if err != nil {
		t.Fatalf("the view of %s does not show the source's objects: %v (%s)", gvr.GroupResource(), err, last)
	}
}

// columnGap separates kubectl's table columns: kubectl pads with at least 3 spaces, and a
// header holds at most single spaces ("NOMINATED NODE").
var columnGap = regexp.MustCompile(`\S+( \S+)*`)

// parseKubectlTable splits kubectl's human-readable output into the header and the rows' cells,
// cutting every line at the columns' start offsets in the header (kubectl aligns the cells of a
// column under its header; a cell may hold spaces, e.g. a CronJob's schedule). The AGE column,
// found by its header, is replaced by "<age>" in every row.
func parseKubectlTable(t *testing.T, out string) ([]string, [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatalf("kubectl printed no table:\n%s", out)
	}
	spans := columnGap.FindAllStringIndex(lines[0], -1)
	header := make([]string, len(spans))
	for i, s := range spans {
		header[i] = lines[0][s[0]:s[1]]
	}
	var rows [][]string
	for _, line := range lines[1:] {
		row := make([]string, len(spans))
		for i, s := range spans {
			start, end := s[0], len(line)
			if i+1 < len(spans) {
				end = spans[i+1][0]
			}
			if start > len(line) {
				start = len(line)
			}
			if end > len(line) {
				end = len(line)
			}
			row[i] = strings.TrimSpace(line[start:end])
			if header[i] == "AGE" {
				row[i] = "<age>"
			}
		}
		rows = append(rows, row)
	}
	return header, rows
}
