package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	ctrlplacement "github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/kubectlmapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/verify"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// pluginRun is one run of the plugin: its output and exit status.
type pluginRun struct {
	stdout, stderr string
	code           int
}

// runPlugin runs kubectl with args and the plugin's directory first on PATH, so that `kubectl
// mapper ...` is the plugin as a user runs it; kubeconfig is the source's.
func runPlugin(t *testing.T, ctx context.Context, plugin, kubeconfig string, args ...string) pluginRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, framework.KubectlPath(t), append([]string{"mapper", "--kubeconfig=" + kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(plugin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := pluginRun{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("kubectl mapper %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// pluginJSON runs the plugin with args (which end in -o json) and decodes its List's items
// (or the one object it printed) into items; it fails the test when the plugin fails.
func pluginJSON(t *testing.T, ctx context.Context, plugin, kubeconfig string, items interface{}, args ...string) {
	t.Helper()
	r := runPlugin(t, ctx, plugin, kubeconfig, args...)
	if r.code != 0 {
		t.Fatalf("kubectl mapper %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	var list struct {
		APIVersion, Kind string
		Items            json.RawMessage
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("kubectl mapper %s printed no JSON object (%v):\n%s", strings.Join(args, " "), err, r.stdout)
	}
	if list.Kind != "List" {
		// One object asked for by name is printed alone, as kubectl get prints it.
		list.Items = json.RawMessage("[" + r.stdout + "]")
	}
	if err := json.Unmarshal(list.Items, items); err != nil {
		t.Fatalf("decoding the items of kubectl mapper %s: %v\n%s", strings.Join(args, " "), err, r.stdout)
	}
}

// pluginLocation is an item of `kubectl mapper locations -o json`.
type pluginLocation struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	kubectlmapper.LocationSummary `json:",inline"`
}

// pluginObjectLocation is an item of `kubectl mapper where -o json`.
type pluginObjectLocation struct {
	Kind string `json:"kind"`
	kubectlmapper.ObjectLocation
}

// TestKubectlMapperPlugin runs the built plugin through real kubectl (`kubectl mapper`, found on
// PATH) against a source, an aggregated mapper-apiserver, mapper-controller and the mappers of
// east and west:
//   - `locations` lists both Ready in pull mode with their objects in sync, in the table, -o wide
//     and -o json;
//   - `where` shows, per location, who assigned an object (a Placement, by hand), the outcome
//     record Conflict of west where a hand-made object holds the copy's place, and a deletion
//     pending on east once the object is unassigned from it while its mapper is stopped;
//   - `verify` exits 0 for east, and 2 with violations against the wrong target;
//   - pausing west (spec.paused) shows in `locations`, and an object created meanwhile has the
//     outcome Paused in `where` until west is unpaused;
//   - `register north` brings a third location from nothing to Ready with a mapper started
//     with the command line it prints, and `verify north` finds its copy; `register south
//     --push` brings a fourth one to Ready, its mapper run by mapper-controller from the Secret
//     it writes.
func TestKubectlMapperPlugin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	env := startLocationsEnv(t, ctx, "east", "west")
	plugin := framework.BuildBinary(t, "./cmd/kubectl-mapper")
	admin := env.source.AdminKubeconfig()
	framework.StartMapperController(t, ctx, env.source, 5*time.Second, "--push-mapper-lease-renew-interval=1s", "--push-mapper-lease-duration=5s",
		"--push-mapper-status-interval=3s", "--push-mapper-discovery-interval=1s")
	for _, ns := range []string{"apps", "placed"} {
		ensureNamespace(t, ctx, env.src, ns)
	}
	for _, l := range []string{"east", "west"} {
		ensureNamespace(t, ctx, env.tgt[l], "apps")
	}
	// A hand-made ConfigMap on west holds the place of apps/shared's copy.
	if _, err := env.tgt["west"].Resource(configMapsGVR).Namespace("apps").Create(ctx, newConfigMap("apps", "shared"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := env.src.Resource(configMapsGVR)
	for _, cm := range []struct{ ns, name string }{{"apps", "shared"}, {"apps", "only-east"}} {
		locs := []string{"east", "west"}
		if cm.name == "only-east" {
			locs = locs[:1]
		}
		if _, err := cms.Namespace(cm.ns).Create(ctx, newConfigMap(cm.ns, cm.name, locs...), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cms.Namespace("placed").Create(ctx, newConfigMap("placed", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.src.Resource(ctrlplacement.Resource).Namespace("placed").Create(ctx,
		newPlacement("placed", "web", "", "v1", "configmaps", map[string]interface{}{"locationNames": []interface{}{"east"}}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mappers := map[string]*mapperProc{}
	for _, l := range []string{"east", "west"} {
		mappers[l] = env.startMapper(t, "mapper-"+l, l, nil, append([]string{"--namespace-mapping=same"}, locationMapperArgs...)...)
	}

	t.Run("locations", func(t *testing.T) {
		var items []pluginLocation
		mapperEventually(t, ctx, 3*time.Minute, "east (3 objects, 3 in sync) and west (1 object, 0 in sync, 1 failing) Ready in kubectl mapper locations -o json", func() (bool, string) {
			items = nil
			pluginJSON(t, ctx, plugin, admin, &items, "locations", "-o", "json")
			byName := map[string]pluginLocation{}
			for _, i := range items {
				byName[i.Metadata.Name] = i
			}
			e, w := byName["east"], byName["west"]
			ok := len(items) == 2 && e.Ready == "True" && w.Ready == "True" && e.Objects == 3 && e.InSync != nil && *e.InSync == 3 &&
				w.Objects == 1 && w.Failing != nil && *w.Failing == 1
			return ok, fmt.Sprintf("%+v", items)
		})
		for _, i := range items {
			if i.APIVersion != kubectlmapper.OutputGroupVersion || i.Kind != "LocationSummary" || i.Mode != "Pull" || i.Shards != 1 || i.ShardsReady != 1 || i.HeartbeatTime == nil || i.Paused || !i.Registered {
				t.Errorf("location %s: %+v, want a registered, unpaused LocationSummary in Pull mode with 1/1 shards and a heartbeat", i.Metadata.Name, i)
			}
		}
		r := runPlugin(t, ctx, plugin, admin, "locations")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME READY MODE SHARDS OBJECTS IN-SYNC FAILING PAUSED HEARTBEAT" ||
			!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "east True Pull 1/1 3 3 0 false ") {
			t.Errorf("kubectl mapper locations: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = runPlugin(t, ctx, plugin, admin, "locations", "west", "-o", "wide")
		if r.code != 0 || !strings.Contains(r.stdout, "MAPPER") || !strings.Contains(r.stdout, "MapperReady") || strings.Contains(r.stdout, "east") {
			t.Errorf("kubectl mapper locations west -o wide: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := runPlugin(t, ctx, plugin, admin, "locations", "nowhere"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
			t.Errorf("kubectl mapper locations nowhere: exit %d, want 1 with NotFound\n%s", r.code, r.stderr)
		}
	})

	t.Run("where", func(t *testing.T) {
		var items []pluginObjectLocation
		mapperEventually(t, ctx, time.Minute, "apps/shared on east by hand without outcome, on west with the outcome Conflict", func() (bool, string) {
			items = nil
			pluginJSON(t, ctx, plugin, admin, &items, "where", "configmaps/shared", "-n", "apps", "-o", "json")
			ok := len(items) == 2 && items[0].Location == "east" && items[0].AssignedBy == kubectlmapper.AssignedByHand && items[0].Outcome == nil && items[0].Finalizer &&
				items[1].Location == "west" && items[1].AssignedBy == kubectlmapper.AssignedByHand && items[1].Outcome != nil && items[1].Outcome.Reason == contract.OutcomeConflict
			return ok, fmt.Sprintf("%+v", items)
		})
		r := runPlugin(t, ctx, plugin, admin, "where", "cm", "shared", "-n", "apps", "-o", "wide")
		if r.code != 0 || !strings.Contains(r.stdout, "Conflict") || !strings.Contains(r.stdout, "without the mapper's label") {
			t.Errorf("kubectl mapper where cm shared -o wide: exit %d, want the Conflict and its message\n%s%s", r.code, r.stdout, r.stderr)
		}
		mapperEventually(t, ctx, time.Minute, "placed/web assigned to east by the Placement web", func() (bool, string) {
			items = nil
			pluginJSON(t, ctx, plugin, admin, &items, "where", "configmaps/web", "-n", "placed", "-o", "json")
			return len(items) == 1 && items[0].Location == "east" && items[0].AssignedBy == "Placement/web", fmt.Sprintf("%+v", items)
		})
		if r := runPlugin(t, ctx, plugin, admin, "where", "configmaps/missing", "-n", "apps"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
			t.Errorf("kubectl mapper where configmaps/missing: exit %d, want 1 with NotFound\n%s", r.code, r.stderr)
		}

		// East's mapper stopped, only-east leaves east: its copy is still there, so the
		// deletion is pending until the mapper comes back and deletes it.
		if err := mappers["east"].proc.Stop(); err != nil {
			t.Fatal(err)
		}
		env.mutate(t, ctx, configMapsGVR, "apps", "only-east", func(u *unstructured.Unstructured) {
			ann := u.GetAnnotations()
			ann[contract.AssignedLocationsAnnotation] = "[]"
			u.SetAnnotations(ann)
		})
		items = nil
		pluginJSON(t, ctx, plugin, admin, &items, "where", "configmaps/only-east", "-n", "apps", "-o", "json")
		if len(items) != 1 || items[0].Location != "east" || items[0].Assigned || !items[0].Finalizer || !items[0].DeletionPending {
			t.Errorf("where configmaps/only-east after its unassignment: %+v, want east, unassigned, deletion pending", items)
		}
		if r := runPlugin(t, ctx, plugin, admin, "where", "configmaps/only-east", "-n", "apps"); !strings.Contains(r.stdout, "Pending") {
			t.Errorf("kubectl mapper where configmaps/only-east: no Pending deletion\n%s%s", r.stdout, r.stderr)
		}
		mappers["east"].restart()
		mapperEventually(t, ctx, time.Minute, "east deletes the copy of only-east and releases it", func() (bool, string) {
			items = nil
			r := runPlugin(t, ctx, plugin, admin, "where", "configmaps/only-east", "-n", "apps", "-o", "json")
			_ = json.Unmarshal([]byte(r.stdout), &struct{ Items *[]pluginObjectLocation }{&items})
			return r.code == 0 && len(items) == 0, r.stdout + r.stderr
		})
	})

	t.Run("verify", func(t *testing.T) {
		target := env.targetKubeconfig["east"]
		var r pluginRun
		mapperEventually(t, ctx, time.Minute, "kubectl mapper verify east exits 0", func() (bool, string) {
			r = runPlugin(t, ctx, plugin, admin, "verify", "east", "--target-kubeconfig="+target, "--namespace-mapping=same", "-o", "json")
			return r.code == 0, fmt.Sprintf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		})
		var report verify.Report
		if err := json.Unmarshal([]byte(r.stdout), &report); err != nil || report.Location != "east" || report.Total != 0 || report.ViewObjects != 2 {
			t.Errorf("kubectl mapper verify east -o json: %v\n%s", err, r.stdout)
		}
		r = runPlugin(t, ctx, plugin, admin, "verify", "east", "--target-kubeconfig="+env.targetKubeconfig["west"], "--namespace-mapping=same")
		if r.code != kubectlmapper.ViolationsExitCode || !strings.Contains(r.stderr, "violations in location east") {
			t.Errorf("kubectl mapper verify east against west's target: exit %d, want %d with violations\n%s%s", r.code, kubectlmapper.ViolationsExitCode, r.stdout, r.stderr)
		}
		if r := runPlugin(t, ctx, plugin, admin, "verify", "east"); r.code != 1 || !strings.Contains(r.stderr, "--target-kubeconfig is required") {
			t.Errorf("kubectl mapper verify east without a target: exit %d, want 1\n%s", r.code, r.stderr)
		}
	})

	t.Run("paused", func(t *testing.T) {
		setPaused := func(paused bool) {
			t.Helper()
			patch := fmt.Sprintf(`{"spec":{"paused":%t}}`, paused)
			if _, err := env.dyn.Resource(synctarget.Resource).Patch(ctx, "west", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		setPaused(true)
		mapperEventually(t, ctx, time.Minute, "west's mapper paused (mapper_paused) and kubectl mapper locations shows it", func() (bool, string) {
			var items []pluginLocation
			pluginJSON(t, ctx, plugin, admin, &items, "locations", "west", "-o", "json")
			v, _ := mappers["west"].metric("mapper_paused", `resource=""`)
			return len(items) == 1 && items[0].Paused && v == 1, fmt.Sprintf("mapper_paused=%v %+v", v, items)
		})
		if _, err := cms.Namespace("apps").Create(ctx, newConfigMap("apps", "while-paused", "west"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		outcome := func() (bool, *contract.OutcomeRecord, string) {
			var items []pluginObjectLocation
			pluginJSON(t, ctx, plugin, admin, &items, "where", "configmaps/while-paused", "-n", "apps", "-o", "json")
			if len(items) != 1 || items[0].Location != "west" {
				return false, nil, fmt.Sprintf("%+v", items)
			}
			return true, items[0].Outcome, fmt.Sprintf("%+v", items)
		}
		mapperEventually(t, ctx, time.Minute, "the outcome Paused on west for apps/while-paused", func() (bool, string) {
			ok, rec, s := outcome()
			return ok && rec != nil && rec.Reason == contract.OutcomePaused, s
		})
		if r := runPlugin(t, ctx, plugin, admin, "locations"); !regexp.MustCompile(`(?m)^west\s+True\s+Pull\s+1/1\s+2\s+\S+\s+\S+\s+true\s`).MatchString(r.stdout) {
			t.Errorf("kubectl mapper locations does not show west paused:\n%s%s", r.stdout, r.stderr)
		}
		setPaused(false)
		mapperEventually(t, ctx, time.Minute, "apps/while-paused applied on west, its outcome record gone", func() (bool, string) {
			ok, rec, s := outcome()
			return ok && rec == nil, s
		})
	})

	t.Run("register", func(t *testing.T) {
		north := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "target-north"})
		ensureNamespace(t, ctx, dynamicClientFor(t, north), "apps")
		if _, err := cms.Namespace("apps").Create(ctx, newConfigMap("apps", "for-north", "north"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		view := filepath.Join(dir, "north-view.kubeconfig")
		r := runPlugin(t, ctx, plugin, admin, "register", "north", "--target-kubeconfig="+north.AdminKubeconfig(), "--labels=region=north",
			"--view-kubeconfig="+view, "--mapper-command="+env.bin)
		if r.code != 0 {
			t.Fatalf("kubectl mapper register north: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		want := kubectlmapper.MapperCommandLine(env.bin, "north", view, north.AdminKubeconfig())
		if !strings.Contains(r.stdout, "\n  "+want+"\n") {
			t.Fatalf("kubectl mapper register north did not print the mapper's command line %q:\n%s", want, r.stdout)
		}
		port, err := framework.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		args := append(strings.Fields(want)[1:], fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port), "--namespace-mapping=same")
		args = append(append(args, mapperTestArgs...), locationMapperArgs...)
		framework.StartProcess(t, framework.ProcessSpec{Name: "mapper-north", Path: env.bin, Args: args, LogDir: os.Getenv(mapperLogDirEnv)})
		mapperEventually(t, ctx, 2*time.Minute, "north Ready with its object in sync", func() (bool, string) {
			var items []pluginLocation
			pluginJSON(t, ctx, plugin, admin, &items, "locations", "north", "-o", "json")
			return len(items) == 1 && items[0].Ready == "True" && items[0].InSync != nil && *items[0].InSync == 1, fmt.Sprintf("%+v", items)
		})
		if r := runPlugin(t, ctx, plugin, admin, "verify", "north", "--target-kubeconfig="+north.AdminKubeconfig(), "--namespace-mapping=same"); r.code != 0 {
			t.Errorf("kubectl mapper verify north: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// Registering again changes nothing and says so.
		if r := runPlugin(t, ctx, plugin, admin, "register", "north", "--target-kubeconfig="+north.AdminKubeconfig(), "--view-kubeconfig="+filepath.Join(dir, "again")); r.code != 0 || !strings.Contains(r.stdout, "SyncTarget north exists") {
			t.Errorf("kubectl mapper register north again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("register --push", func(t *testing.T) {
		south := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "target-south"})
		ensureNamespace(t, ctx, dynamicClientFor(t, south), "apps")
		if _, err := cms.Namespace("apps").Create(ctx, newConfigMap("apps", "for-south", "south"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := runPlugin(t, ctx, plugin, admin, "register", "south", "--push", "--target-kubeconfig="+south.AdminKubeconfig())
		if r.code != 0 || !strings.Contains(r.stdout, "wrote the target kubeconfig to Secret cluster-mapper-system/south-kubeconfig") ||
			!strings.Contains(r.stdout, "mapper-controller starts the mapper of south") {
			t.Fatalf("kubectl mapper register south --push: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		mapperEventually(t, ctx, 2*time.Minute, "south Ready in push mode with its object in sync", func() (bool, string) {
			var items []pluginLocation
			pluginJSON(t, ctx, plugin, admin, &items, "locations", "south", "-o", "json")
			return len(items) == 1 && items[0].Ready == "True" && items[0].Mode == "Push" && items[0].InSync != nil && *items[0].InSync == 1, fmt.Sprintf("%+v", items)
		})
		// Retired (docs/day2.md): deleting its SyncTarget stops the push mapper, which lets
		// south's kube-apiserver stop without waiting for the mapper's watches.
		if err := env.dyn.Resource(synctarget.Resource).Delete(ctx, "south", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, ctx, env.dyn, "south", "PushMapperStopped")
	})
}
