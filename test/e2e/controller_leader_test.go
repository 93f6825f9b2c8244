package e2e

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestControllerLeadsAgainAfterASourceOutage: mapper-controller reaches the source through a
// link the test cuts for longer than the leader Lease's renew deadline. It loses the Lease
// (leader_election_master_status goes to 0), stops its controllers and stays up as a
// candidate; once the link is back it leads again and its controllers work: the location
// lifecycle controller sets Ready=Unknown on a SyncTarget created after the outage, whose
// location has no Lease. Fails before runWhileLeading: the process exited with "lost the
// leader lease" during the outage, and nothing restarted it.
func TestControllerLeadsAgainAfterASourceOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	source, dyn := startControlSource(t, ctx)
	sourceURL, err := url.Parse(source.URL)
	if err != nil {
		t.Fatal(err)
	}
	link := framework.StartTCPProxy(t, sourceURL.Host)
	kubeconfig := source.Admin().KubeconfigFor(t, "https://"+link.Addr, source.ServingCABundle())
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctrl := &mapperProc{name: "mapper-controller", metricsAddr: fmt.Sprintf("127.0.0.1:%d", port), owner: t}
	ctrl.proc = framework.StartMapperController(t, ctx, source, 3*time.Second,
		"--kubeconfig="+kubeconfig, "--bind-address="+ctrl.metricsAddr,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms")
	leading := func(want float64) func() (bool, string) {
		return func() (bool, string) {
			if !ctrl.proc.Running() {
				return false, fmt.Sprintf("mapper-controller exited (%v):\n%s", ctrl.proc.ExitError(), ctrl.proc.LogTail(20))
			}
			v, ok := ctrl.metric("leader_election_master_status", `name="mapper-controller"`)
			return ok && v == want, fmt.Sprintf("leader_election_master_status = %v (found %v)", v, ok)
		}
	}
	mapperEventually(t, ctx, 30*time.Second, "mapper-controller leads", leading(1))

	start := time.Now()
	link.Cut()
	mapperEventually(t, ctx, 30*time.Second, "mapper-controller loses the Lease during the outage", leading(0))
	t.Logf("the Lease was lost %v into the outage", time.Since(start).Round(time.Millisecond))
	link.Restore()
	mapperEventually(t, ctx, 30*time.Second, "mapper-controller leads again after the outage", leading(1))
	t.Logf("leading again %v after the outage began", time.Since(start).Round(time.Millisecond))

	if _, err := dyn.Resource(synctarget.Resource).Create(ctx, newSyncTarget("after-outage", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSyncTarget(t, ctx, dyn, "after-outage", time.Minute, "Ready=Unknown set by the controllers of the new term", readyIs(metav1.ConditionUnknown, ""))
	if !ctrl.proc.Running() {
		t.Fatalf("mapper-controller exited: %v", ctrl.proc.ExitError())
	}
}
