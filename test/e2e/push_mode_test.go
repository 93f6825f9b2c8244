package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/heartbeat"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestPushMode: three locations, east and west in pull mode (cmd/mapper next to the
// target) and north in push mode (mapper-controller runs its mapper in-process from the
// kubeconfig Secret of spec.kubeconfigSecretRef). The push target gets its objects and north
// is Ready=True in mode Push, like the pull locations in mode Pull; rotating the Secret to a
// new credential restarts the in-process mapper (metric and Event) and it keeps syncing; a
// Secret pointing at an unreachable server gives TargetUnreachable, a malformed one
// KubeconfigInvalid, a deleted one KubeconfigSecretMissing, none of which crashes anything
// (the unreachable address and its dial error stay out of the status and Events, and a
// kubeconfig naming a proxy-url is refused before anything connects to the proxy);
// deleting the SyncTarget stops the mapper (metric and Event) and leaves its copies on the
// target. mapper-controller runs with only the rules docs/locations.md names for it.
func TestPushMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	env := startLocationsEnv(t, ctx, "east", "west", "north")
	ensureNamespace(t, ctx, env.src, "apps")
	for _, l := range []string{"east", "west", "north"} {
		for i := 0; i < 2; i++ {
			if _, err := env.src.Resource(configMapsGVR).Namespace("apps").Create(ctx, newConfigMap("apps", fmt.Sprintf("%s-%d", l, i), l), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	kube := env.source.Admin().Client(t)

	// north's kubeconfig Secret: a credential of its target, with the data inline.
	secretFor := func(user string) []byte {
		u := env.targets["north"].NewUser(t, user, "system:masters")
		data, err := os.ReadFile(u.KubeconfigPath)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	const secretName = "north-kubeconfig"
	if _, err := kube.CoreV1().Secrets("cluster-mapper-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: "cluster-mapper-system"},
		Data:       map[string][]byte{"kubeconfig": secretFor("push-north-1")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"spec":{"kubeconfigSecretRef":{"namespace":"cluster-mapper-system","name":%q}}}`, secretName)
	if _, err := env.dyn.Resource(synctarget.Resource).Patch(ctx, "north", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("switching north to push mode: %v", err)
	}

	// The source's open watches of SyncTargets before mapper-controller runs
	// (mapper-apiserver's): mapper-controller adds its shared informer's, however many of its
	// controllers read SyncTargets, and its Customization follower's.
	syncTargetWatches := func() float64 {
		return controlPlaneMetric(t, ctx, env.source, "apiserver_longrunning_requests", []string{`resource="synctargets"`}, []string{`verb="WATCH"`})
	}
	watchesBefore := syncTargetWatches()
	ctrl := startPushController(t, ctx, env, "north")
	env.startMapper(t, "mapper-east", "east", nil, locationMapperArgs...)
	env.startMapper(t, "mapper-west", "west", nil, locationMapperArgs...)

	readyIn := func(mode string) func(*controlv1alpha1.SyncTarget) bool {
		return func(st *controlv1alpha1.SyncTarget) bool {
			o := st.Status.Objects
			return readyIs(metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady)(st) && st.Status.Mapper != nil && st.Status.Mapper.Mode == mode &&
				o != nil && o.Assigned == 2 && o.InSync == 2 && o.InViolation == 0
		}
	}
	var identity string
	t.Run("the push target gets its objects and is Ready in mode Push, next to two pull locations", func(t *testing.T) {
		for _, l := range []string{"east", "west"} {
			waitSyncTarget(t, ctx, env.dyn, l, 3*time.Minute, "Ready=True in mode Pull with 2 objects in sync", readyIn(controlv1alpha1.ModePull))
		}
		st := waitSyncTarget(t, ctx, env.dyn, "north", 3*time.Minute, "Ready=True in mode Push with 2 objects in sync", readyIn(controlv1alpha1.ModePush))
		identity = st.Status.Mapper.Identity
		lease := waitLeaseRenewed(t, ctx, kube, "north", nil)
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != identity {
			t.Errorf("north's Lease holder %v is not its mapper identity %q", lease.Spec.HolderIdentity, identity)
		}
		env.converge(t, ctx, "push mode start", "north")
		waitEvent(t, ctx, env.dyn, "north", "PushMapperStarted")
	})

	t.Run("rotating the Secret restarts the in-process mapper, which keeps syncing", func(t *testing.T) {
		setSecret(t, ctx, kube, secretName, secretFor("push-north-2"))
		waitPushMetric(t, ctx, ctrl, "restart with the new kubeconfig", "mapper_controller_push_mapper_starts_total", `location="north"`, `reason="KubeconfigChanged"`)
		waitEvent(t, ctx, env.dyn, "north", "PushMapperRestarted")
		if _, err := env.src.Resource(configMapsGVR).Namespace("apps").Create(ctx, newConfigMap("apps", "north-after-rotation", "north"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		st := waitSyncTarget(t, ctx, env.dyn, "north", 2*time.Minute, "Ready=True by the restarted mapper with 3 objects in sync", func(st *controlv1alpha1.SyncTarget) bool {
			o := st.Status.Objects
			return readyIs(metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady)(st) && st.Status.Mapper != nil && st.Status.Mapper.Identity != identity &&
				o != nil && o.Assigned == 3 && o.InSync == 3
		})
		if st.Status.Mapper.Mode != controlv1alpha1.ModePush {
			t.Errorf("mode after the restart = %q, want Push", st.Status.Mapper.Mode)
		}
		env.converge(t, ctx, "Secret rotation", "north")
	})

	t.Run("bad kubeconfigs set Ready=False with a reason", func(t *testing.T) {
		port, err := framework.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		unreachable := env.targets["north"].Admin().RESTConfig()
		unreachable.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
		path := t.TempDir() + "/unreachable"
		if err := framework.WriteKubeconfig(path, unreachable); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		setSecret(t, ctx, kube, secretName, data)
		st := waitSyncTarget(t, ctx, env.dyn, "north", time.Minute, "Ready=False TargetUnreachable in mode Push", func(st *controlv1alpha1.SyncTarget) bool {
			return readyIs(metav1.ConditionFalse, controlv1alpha1.ReasonTargetUnreachable)(st) && st.Status.Mapper != nil && st.Status.Mapper.Mode == controlv1alpha1.ModePush
		})
		// The dial error stays in the logs: neither the condition nor an Event says what
		// connecting to the address gave, else whoever writes the Secret could probe ports
		// with it (the address itself is the Secret writer's, and Events name it).
		if c := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetReady); c.Message != heartbeat.TargetUnreachableMessage {
			t.Errorf("Ready's message %q, want the generic %q", c.Message, heartbeat.TargetUnreachableMessage)
		}
		for _, m := range eventMessages(t, ctx, env.dyn, "north") {
			if strings.Contains(m, "dial") || strings.Contains(m, "refused") || strings.Contains(m, "/version") {
				t.Errorf("an Event about north tells what connecting to the target gave: %q", m)
			}
		}

		// A proxy-url is refused before anything connects to it (--push-allow-proxy-url is off).
		proxy, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer proxy.Close()
		var dialed atomic.Int32
		go func() {
			for {
				c, err := proxy.Accept()
				if err != nil {
					return
				}
				dialed.Add(1)
				_ = c.Close()
			}
		}()
		kc, err := clientcmd.Load(secretFor("push-north-proxied"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range kc.Clusters {
			c.ProxyURL = "http://" + proxy.Addr().String()
		}
		proxied, err := clientcmd.Write(*kc)
		if err != nil {
			t.Fatal(err)
		}
		setSecret(t, ctx, kube, secretName, proxied)
		st = waitSyncTarget(t, ctx, env.dyn, "north", time.Minute, "Ready=False KubeconfigInvalid for a proxy-url", readyIs(metav1.ConditionFalse, controlv1alpha1.ReasonKubeconfigInvalid))
		if c := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetReady); !strings.Contains(c.Message, "--push-allow-proxy-url") {
			t.Errorf("Ready's message %q does not name --push-allow-proxy-url", c.Message)
		}
		if n := dialed.Load(); n != 0 {
			t.Errorf("mapper-controller connected %d times to the kubeconfig's proxy", n)
		}

		setSecret(t, ctx, kube, secretName, []byte("apiVersion: v1\nkind: Config\nclusters: {not: [a list"))
		waitSyncTarget(t, ctx, env.dyn, "north", time.Minute, "Ready=False KubeconfigInvalid", readyIs(metav1.ConditionFalse, controlv1alpha1.ReasonKubeconfigInvalid))
		waitPushMetric(t, ctx, ctrl, "stop on an invalid kubeconfig", "mapper_controller_push_mapper_stops_total", `location="north"`, `reason="KubeconfigInvalid"`)

		if err := kube.CoreV1().Secrets("cluster-mapper-system").Delete(ctx, secretName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSyncTarget(t, ctx, env.dyn, "north", time.Minute, "Ready=False KubeconfigSecretMissing", readyIs(metav1.ConditionFalse, controlv1alpha1.ReasonKubeconfigSecretMissing))

		if _, err := kube.CoreV1().Secrets("cluster-mapper-system").Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: "cluster-mapper-system"},
			Data:       map[string][]byte{"kubeconfig": secretFor("push-north-3")},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSyncTarget(t, ctx, env.dyn, "north", 2*time.Minute, "Ready=True again with a good Secret", readyIs(metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady))
		if !ctrl.proc.Running() {
			t.Fatalf("mapper-controller exited: %v", ctrl.proc.ExitError())
		}
	})

	t.Run("mapper-controller watches SyncTargets once", func(t *testing.T) {
		// Every controller that reads SyncTargets has handled some by now: the location
		// lifecycle and push controllers queued them, and the placement controller is
		// running. Their informers listed before their handlers ran, and each watch opens
		// as its list ends.
		for _, queue := range []string{"location_lifecycle", "push_mappers"} {
			waitPushMetric(t, ctx, ctrl, "SyncTargets queued by "+queue, "workqueue_adds_total", `name="`+queue+`"`)
		}
		// Two: the shared informer's, and that of the Customization status controller's
		// follower (pkg/customization, the same code as mapper-apiserver's, which follows
		// SyncTargets of every logical cluster on its own).
		if n := syncTargetWatches() - watchesBefore; n != 2 {
			t.Errorf("mapper-controller has %v watches of SyncTargets open at the source, want 2 (the shared informer's and the Customization follower's)", n)
		}
	})

	t.Run("deleting the SyncTarget stops its mapper and leaves its copies", func(t *testing.T) {
		env.converge(t, ctx, "before deleting the SyncTarget", "north")
		if err := env.dyn.Resource(synctarget.Resource).Delete(ctx, "north", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPushMetric(t, ctx, ctrl, "stop of the deleted location's mapper", "mapper_controller_push_mapper_stops_total", `location="north"`, `reason="SyncTargetDeleted"`)
		mapperEventually(t, ctx, 30*time.Second, "no in-process mapper runs", func() (bool, string) {
			v, ok := ctrl.metric("mapper_controller_push_mappers")
			return ok && v == 0, fmt.Sprintf("mapper_controller_push_mappers = %v (found %v)", v, ok)
		})
		waitEvent(t, ctx, env.dyn, "north", "PushMapperStopped")
		// The mapper has stopped (the metric says so): nothing can delete the copies now.
		for _, name := range []string{"north-0", "north-1", "north-after-rotation"} {
			if env.targetObject(t, ctx, "north", configMapsGVR, "apps", name) == nil {
				t.Errorf("the copy apps/%s left north's target after its SyncTarget was deleted", name)
			}
		}
		for _, l := range []string{"east", "west"} {
			waitSyncTarget(t, ctx, env.dyn, l, time.Minute, "pull locations still Ready", readyIs(metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady))
		}
	})
}

// pushControllerServiceAccount is mapper-controller's identity in the source: a client
// certificate with the user name of the ServiceAccount artifacts/mapper-controller/rbac.yaml
// binds (RBAC matches ServiceAccount subjects by user name).
const pushControllerServiceAccount = "system:serviceaccount:cluster-mapper-system:mapper-controller"

// startPushController starts mapper-controller with fast push-mode mappers and exactly the
// rules docs/locations.md names: artifacts/mapper-controller/rbac.yaml applied with kubectl,
// and `mapper-apiserver grant --service-account` for each push location. It returns the
// process with its metrics address.
func startPushController(t *testing.T, ctx context.Context, env *locationsEnv, pushLocations ...string) *mapperProc {
	t.Helper()
	rbac, err := filepath.Abs("../../artifacts/mapper-controller/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := framework.RunKubectl(t, env.source.AdminKubeconfig(), "apply", "-f", rbac); err != nil {
		t.Fatalf("kubectl apply -f artifacts/mapper-controller/rbac.yaml: %v\n%s", err, out)
	}
	apiserverBin := framework.BuildBinary(t, "./cmd/mapper-apiserver")
	for _, l := range pushLocations {
		// grant --apply sets the bindings' subjects to exactly those given: keep the
		// location's user (the tests' `mapper verify` reads the view as it).
		out, err := exec.CommandContext(ctx, apiserverBin, "grant", "--location="+l, "--service-account=cluster-mapper-system/mapper-controller",
			"--user="+env.users[l].Name, "--apply", "--kubeconfig="+env.source.AdminKubeconfig()).CombinedOutput()
		if err != nil {
			t.Fatalf("mapper-apiserver grant --location=%s --service-account: %v\n%s", l, err, out)
		}
	}
	user := env.source.NewUser(t, pushControllerServiceAccount)
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	m := &mapperProc{name: "mapper-controller", metricsAddr: fmt.Sprintf("127.0.0.1:%d", port), owner: t}
	m.args = []string{
		"--kubeconfig=" + user.KubeconfigPath, "--location-grace-period=5s",
		"--bind-address=" + m.metricsAddr, "--leader-elect=true", "-v=2",
		"--push-mapper-lease-renew-interval=1s", "--push-mapper-lease-duration=5s", "--push-mapper-status-interval=3s",
		"--push-mapper-discovery-interval=1s", "--push-mapper-orphan-sweep-interval=3s", "--push-mapper-max-retry-delay=3s",
	}
	m.start(framework.BuildBinary(t, "./cmd/mapper-controller"))
	return m
}

// setSecret replaces the kubeconfig of the Secret name in cluster-mapper-system.
func setSecret(t *testing.T, ctx context.Context, kube kubernetes.Interface, name string, kubeconfig []byte) {
	t.Helper()
	s, err := kube.CoreV1().Secrets("cluster-mapper-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{"kubeconfig": kubeconfig}
	if _, err := kube.CoreV1().Secrets("cluster-mapper-system").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitPushMetric waits until mapper-controller's metric with labels is at least 1.
func waitPushMetric(t *testing.T, ctx context.Context, ctrl *mapperProc, what, name string, labels ...string) {
	t.Helper()
	mapperEventually(t, ctx, time.Minute, what, func() (bool, string) {
		v, ok := ctrl.metric(name, labels...)
		return ok && v >= 1, fmt.Sprintf("%s%v = %v (found %v)", name, labels, v, ok)
	})
}
