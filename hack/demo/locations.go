package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
	"github.com/cluster-mapper/cluster-mapper/test/framework/programtb"
)

// locationGracePeriod is mapper-controller's --location-grace-period in the demo (its default).
const locationGracePeriod = 40 * time.Second

// registerLocations installs the CRDs of artifacts/crds into source and creates one SyncTarget
// per demo location, labelled with locationLabels (docs/locations.md, "Registering a location").
func registerLocations(tb *programtb.TB, ctx context.Context, source *framework.ControlPlane) {
	framework.InstallControlCRDs(tb, ctx, source)
	dyn := dynamicClient(tb, source)
	for _, loc := range locations {
		u, err := synctarget.ToUnstructured(&controlv1alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: loc, Labels: locationLabels[loc]}})
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := dyn.Resource(synctarget.Resource).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			tb.Fatalf("registering location %s: %v", loc, err)
		}
	}
}

// locationHealth waits (at most two minutes) until every location's mapper has reported
// Ready=True, and returns what `kubectl get synctargets` and `kubectl get locations` print then. A
// location that does not get there is shown as it is, with a warning: the demo still runs.
func locationHealth(tb *programtb.TB, ctx context.Context, source *framework.ControlPlane) string {
	dyn := dynamicClient(tb, source)
	want := map[string]metav1.ConditionStatus{}
	for _, loc := range locations {
		want[loc] = metav1.ConditionTrue
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for loc, status := range want {
			st, err := synctarget.NewClient(dyn).GetStatus(ctx, loc)
			if err != nil {
				last = err
				return false, nil
			}
			if c := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetReady); c == nil || c.Status != status {
				last = fmt.Errorf("location %s is not Ready=%s yet", loc, status)
				return false, nil
			}
		}
		return true, nil
	})
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "  (warning: %v)\n", last)
	}
	for _, args := range [][]string{{"get", "synctargets", "-o", "wide"}, {"get", "locations"}} {
		out, err := framework.RunKubectl(tb, source.AdminKubeconfig(), args...)
		if err != nil {
			out = err.Error()
		}
		fmt.Fprintf(&b, "  $ kubectl %s\n", strings.Join(args, " "))
		for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			fmt.Fprintf(&b, "  %s\n", line)
		}
	}
	return b.String()
}

// dynamicClient returns a dynamic client of source as its admin.
func dynamicClient(tb *programtb.TB, source *framework.ControlPlane) dynamic.Interface {
	d, err := dynamic.NewForConfig(source.AdminConfig())
	if err != nil {
		tb.Fatal(err)
	}
	return d
}
