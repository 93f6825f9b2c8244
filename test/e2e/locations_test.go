package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestSyncTargetCRDValidation installs artifacts/crds into a real kube-apiserver and checks
// that the CEL rule on metadata.name rejects names that are not DNS-1123 labels (which
// kube-apiserver alone would accept for a cluster-scoped CRD: it checks DNS-1123
// subdomains), accepts a valid one, and that kubectl prints the printer columns.
func TestSyncTargetCRDValidation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, dyn := startControlSource(t, ctx)

	if _, err := dyn.Resource(synctarget.Resource).Create(ctx, newSyncTarget("east-1", map[string]string{"region": "eu"}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a valid SyncTarget was refused: %v", err)
	}
	for _, bad := range []string{"east.zone-a", strings.Repeat("a", 64), "-east", "east-"} {
		_, err := dyn.Resource(synctarget.Resource).Create(ctx, newSyncTarget(bad, nil), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("SyncTarget %q: want 422 Invalid, got %v", bad, err)
			continue
		}
		if strings.HasPrefix(bad, "east.") && !strings.Contains(err.Error(), "DNS-1123 label") {
			t.Errorf("SyncTarget %q: the refusal does not come from the CEL rule: %v", bad, err)
		}
	}
	out, err := framework.RunKubectl(t, cp.AdminKubeconfig(), "get", "synctargets")
	if err != nil {
		t.Fatalf("kubectl get synctargets: %v\n%s", err, out)
	}
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if want := []string{"NAME", "READY", "MODE", "ASSIGNED", "IN-SYNC", "VIOLATIONS", "PAUSED", "AGE"}; strings.Join(header, " ") != strings.Join(want, " ") {
		t.Errorf("kubectl get synctargets columns = %v, want %v", header, want)
	}
}

// locationsEnv is a source with the control CRDs, mapper-apiserver registered with its
// aggregator, and one target per location.
type locationsEnv struct {
	*mapperEnv
	api *framework.APIService
	dyn dynamic.Interface
	// users are the mappers' identities in the source, per location.
	users map[string]*framework.User
}

// startLocationsEnv starts the source and targets, installs the CRDs, registers a
// SyncTarget per location and grants each location's user exactly its rules with
// `mapper-apiserver grant --apply`; each mapper's view kubeconfig points at the view through
// the source's aggregator, so the mapper finds its Lease and SyncTarget on the same host.
func startLocationsEnv(t *testing.T, ctx context.Context, locations ...string) *locationsEnv {
	t.Helper()
	return startLocationsEnvFor(t, ctx, "configmaps", locations...)
}

// startLocationsEnvFor is startLocationsEnv with mapper-apiserver mirroring resources (its
// --resources value).
func startLocationsEnvFor(t *testing.T, ctx context.Context, resources string, locations ...string) *locationsEnv {
	t.Helper()
	return startLocationsEnvWith(t, ctx, resources, nil, nil, locations...)
}

// startLocationsEnvWith is startLocationsEnvFor with setup, when not nil, run on the source
// (with its admin's dynamic client) and on every target before mapper-apiserver starts (the
// CRDs of mirrored custom resources), and serverArgs added to mapper-apiserver's command line
// (e.g. "--location-access=Bound"; the control CRDs are installed before it starts).
func startLocationsEnvWith(t *testing.T, ctx context.Context, resources string, setup func(dyn dynamic.Interface), serverArgs []string, locations ...string) *locationsEnv {
	t.Helper()
	opts := []framework.ControlPlaneOptions{{Name: "source"}}
	shared := framework.StartEtcd(t)
	for _, l := range locations {
		opts = append(opts, framework.ControlPlaneOptions{Name: "target-" + l, Etcd: shared})
	}
	cps := framework.StartControlPlanes(t, opts...)
	env := &locationsEnv{mapperEnv: &mapperEnv{
		source: cps[0], targets: map[string]*framework.ControlPlane{}, tgt: map[string]dynamic.Interface{},
		viewKubeconfig: map[string]string{}, targetKubeconfig: map[string]string{},
		bin: framework.BuildBinary(t, "./cmd/mapper"), owner: t,
	}, users: map[string]*framework.User{}}
	env.src = dynamicClientFor(t, env.source)
	env.dyn = env.src
	framework.InstallControlCRDs(t, ctx, env.source)
	if setup != nil {
		setup(env.src)
		for _, cp := range cps[1:] {
			setup(dynamicClientFor(t, cp))
		}
	}
	env.api = framework.StartAggregatedMapperAPIServer(t, env.source, append([]string{"--resources=" + resources, "--source-discovery-interval=1s", "--bookmark-interval=1s"}, serverArgs...)...)
	env.server = env.api.Server
	apiserverBin := framework.BuildBinary(t, "./cmd/mapper-apiserver")
	for i, l := range locations {
		env.targets[l] = cps[i+1]
		env.tgt[l] = dynamicClientFor(t, cps[i+1])
		env.targetKubeconfig[l] = cps[i+1].AdminKubeconfig()
		if _, err := env.dyn.Resource(synctarget.Resource).Create(ctx, newSyncTarget(l, map[string]string{"region": l}), metav1.CreateOptions{}); err != nil {
			t.Fatalf("registering %s: %v", l, err)
		}
		user := env.source.NewUser(t, "mapper-"+l)
		env.users[l] = user
		out, err := exec.CommandContext(ctx, apiserverBin, "grant", "--location="+l, "--user="+user.Name, "--apply",
			"--kubeconfig="+env.source.AdminKubeconfig()).CombinedOutput()
		if err != nil {
			t.Fatalf("mapper-apiserver grant --location=%s --apply: %v\n%s", l, err, out)
		}
		env.viewKubeconfig[l] = user.KubeconfigFor(t, env.api.ViewURL(l), env.source.ServingCABundle())
	}
	return env
}

// startLifecycleController starts mapper-controller as source's admin with the location grace
// period grace (its location lifecycle controller and the rest of its default controllers).
func startLifecycleController(t *testing.T, source *framework.ControlPlane, grace time.Duration) {
	t.Helper()
	ctrlBin := framework.BuildBinary(t, "./cmd/mapper-controller")
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	framework.StartProcess(t, framework.ProcessSpec{Name: "mapper-controller", Path: ctrlBin, Args: []string{
		"--kubeconfig=" + source.AdminKubeconfig(), "--location-grace-period=" + grace.String(),
		fmt.Sprintf("--bind-address=127.0.0.1:%d", port), "--leader-elect=true", "-v=2",
	}})
}

// locationMapperArgs make the heartbeat fast for tests: renew every second, a 5s Lease,
// status at least every 3s.
var locationMapperArgs = []string{"--lease-renew-interval=1s", "--lease-duration=5s", "--status-interval=3s"}

// TestLocationLifecycle: a mapper renews its Lease and writes its SyncTarget status (Ready,
// identity, mode, the verify counts); it cannot touch another location's Lease or
// SyncTarget (403, with only the grant helper's rules); mapper-controller marks a location
// whose mapper was killed with SIGKILL Ready=Unknown within the grace period plus 5s, and the
// restarted mapper makes it Ready again with 0 violations; a location without a mapper is
// Unknown from the start; Events record the transitions.
func TestLocationLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	env := startLocationsEnv(t, ctx, "east", "west")
	ensureNamespace(t, ctx, env.src, "apps")
	for i := 0; i < 3; i++ {
		if _, err := env.src.Resource(configMapsGVR).Namespace("apps").Create(ctx, newConfigMap("apps", fmt.Sprintf("cm-%d", i), "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	const grace = 5 * time.Second
	startLifecycleController(t, env.source, grace)

	east := env.startMapper(t, "mapper-east", "east", nil, locationMapperArgs...)

	t.Run("mapper renews its Lease and writes its SyncTarget status", func(t *testing.T) {
		st := waitSyncTarget(t, ctx, env.dyn, "east", 3*time.Minute, "Ready=True with the verify counts of 3 objects", func(st *controlv1alpha1.SyncTarget) bool {
			o := st.Status.Objects
			return readyIs(metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady)(st) && o != nil && o.Assigned == 3 && o.InSync == 3 && o.InViolation == 0
		})
		if st.Status.Mapper == nil || st.Status.Mapper.Mode != controlv1alpha1.ModePull || st.Status.Mapper.Identity == "" {
			t.Errorf("status.mapper = %+v, want mode Pull and an identity", st.Status.Mapper)
		}
		if len(st.Status.Resources) != 1 || st.Status.Resources[0].Resource != "configmaps" || st.Status.Resources[0].State != controlv1alpha1.ResourceSynced {
			t.Errorf("status.resources = %+v, want configmaps Synced", st.Status.Resources)
		}
		kube := env.source.Admin().Client(t)
		first := waitLeaseRenewed(t, ctx, kube, "east", nil)
		if first.Spec.HolderIdentity == nil || *first.Spec.HolderIdentity != st.Status.Mapper.Identity {
			t.Errorf("the Lease's holder %v is not the status's mapper identity %q", first.Spec.HolderIdentity, st.Status.Mapper.Identity)
		}
		waitLeaseRenewed(t, ctx, kube, "east", first.Spec.RenewTime)
	})

	t.Run("a mapper cannot write another location's Lease or SyncTarget", func(t *testing.T) {
		kube, err := kubernetes.NewForConfig(env.users["east"].RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		dyn, err := dynamic.NewForConfig(env.users["east"].RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		own, err := kube.CoordinationV1().Leases("cluster-mapper-system").Get(ctx, "east", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("east cannot read its own Lease: %v", err)
		}
		_, err = kube.CoordinationV1().Leases("cluster-mapper-system").Get(ctx, "west", metav1.GetOptions{})
		expectForbidden(t, "get west's Lease", err)
		stolen := own.DeepCopy()
		stolen.Name, stolen.ResourceVersion = "west", ""
		_, err = kube.CoordinationV1().Leases("cluster-mapper-system").Update(ctx, stolen, metav1.UpdateOptions{})
		expectForbidden(t, "update west's Lease", err)
		_, err = kube.CoordinationV1().Leases("cluster-mapper-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "north"}}, metav1.CreateOptions{})
		expectForbidden(t, "create a Lease", err)
		_, err = dyn.Resource(synctarget.Resource).Get(ctx, "west", metav1.GetOptions{}, "status")
		expectForbidden(t, "get west's SyncTarget status", err)
		westObj, err := env.dyn.Resource(synctarget.Resource).Get(ctx, "west", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = dyn.Resource(synctarget.Resource).UpdateStatus(ctx, westObj, metav1.UpdateOptions{})
		expectForbidden(t, "update west's SyncTarget status", err)
		eastObj, err := env.dyn.Resource(synctarget.Resource).Get(ctx, "east", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eastObj.SetLabels(map[string]string{"region": "hijacked"})
		_, err = dyn.Resource(synctarget.Resource).Update(ctx, eastObj, metav1.UpdateOptions{})
		expectForbidden(t, "update its own SyncTarget's spec and labels", err)
	})

	t.Run("a location without a mapper is Unknown", func(t *testing.T) {
		waitSyncTarget(t, ctx, env.dyn, "west", time.Minute, "Ready=Unknown (MapperNeverRenewed)", readyIs(metav1.ConditionUnknown, controlv1alpha1.ReasonNoLease))
	})

	t.Run("SIGKILL makes the location Unknown within the grace period plus 5s; a restart makes it Ready", func(t *testing.T) {
		killed := time.Now()
		if err := syscall.Kill(-east.proc.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-east.proc.Exited()
		waitSyncTarget(t, ctx, env.dyn, "east", grace+5*time.Second, "Ready=Unknown (MapperLeaseExpired)", readyIs(metav1.ConditionUnknown, controlv1alpha1.ReasonLeaseExpired))
		t.Logf("Ready=Unknown %s after SIGKILL (grace period %s)", time.Since(killed).Round(100*time.Millisecond), grace)
		waitEvent(t, ctx, env.dyn, "east", "LocationStatusUnknown")

		east.restart()
		waitSyncTarget(t, ctx, env.dyn, "east", 3*time.Minute, "Ready=True after the restart", readyIs(metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady))
		waitEvent(t, ctx, env.dyn, "east", "LocationReady")
		if r := env.verifyOnce(t, "east"); r.Total != 0 {
			t.Errorf("after the restart, verify reports violations:\n%s", mapperReportText(r))
		}
	})
}

// waitLeaseRenewed waits until the Lease location has a renewTime after since (any
// renewTime when since is nil) and returns it.
func waitLeaseRenewed(t *testing.T, ctx context.Context, kube kubernetes.Interface, location string, since *metav1.MicroTime) *coordinationv1.Lease {
	t.Helper()
	var lease *coordinationv1.Lease
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := kube.CoordinationV1().Leases("cluster-mapper-system").Get(ctx, location, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		lease = l
		return l.Spec.RenewTime != nil && (since == nil || l.Spec.RenewTime.After(since.Time)), nil
	})
	if err != nil {
		t.Fatalf("the Lease of %s was not renewed (last: %+v): %v", location, lease, err)
	}
	return lease
}
