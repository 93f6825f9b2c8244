package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	ctrldependencies "github.com/cluster-mapper/cluster-mapper/pkg/controller/dependencies"
	ctrlplacement "github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

var (
	secretsGVR         = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	serviceAccountsGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	servicesGVR        = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	pvcsGVR            = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	hpasGVR            = schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}
)

// appsResources are the resources mapper-apiserver mirrors in TestApplications.
const appsResources = "configmaps,secrets,services,serviceaccounts,persistentvolumeclaims,deployments.apps,horizontalpodautoscalers.autoscaling,widgets.example.com"

// appObject is one object of an application.
type appObject struct {
	gvr  schema.GroupVersionResource
	name string
}

// String returns resource/name.
func (o appObject) String() string { return o.gvr.Resource + "/" + o.name }

// appObjects returns the objects of the application name, its Deployment first: the
// ConfigMap, Secret, ServiceAccount and PersistentVolumeClaim its Pod template references,
// the Service that selects its Pods and the HorizontalPodAutoscaler that targets it.
func appObjects(name string) []appObject {
	return []appObject{
		{deploymentsGVR, name}, {configMapsGVR, name + "-config"}, {secretsGVR, name + "-secret"}, {serviceAccountsGVR, name + "-sa"},
		{pvcsGVR, name + "-data"}, {servicesGVR, name}, {hpasGVR, name},
	}
}

// createApp creates the application name in ns (appObjects), its Deployment assigned by hand
// to locations when any.
func createApp(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns, name string, locations ...string) {
	t.Helper()
	labels := map[string]string{"app": name}
	must := func(_ interface{}, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("creating application %s/%s: %v", ns, name, err)
		}
	}
	must(kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-config"}, Data: map[string]string{"greeting": "hello " + name}}, metav1.CreateOptions{}))
	must(kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-secret"}, StringData: map[string]string{"token": "t-" + name}}, metav1.CreateOptions{}))
	must(kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name + "-sa"}}, metav1.CreateOptions{}))
	must(kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name + "-data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{}))
	must(kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}))
	must(kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas: ptr.To[int32](1), MaxReplicas: 3}}, metav1.CreateOptions{}))
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				ServiceAccountName: name + "-sa",
				Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1",
					EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name + "-secret"}}}}}},
				Volumes: []corev1.Volume{
					{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name + "-config"}}}},
					{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name + "-data"}}},
				},
			}}}}
	if len(locations) > 0 {
		b, _ := json.Marshal(locations)
		d.Annotations = map[string]string{contract.AssignedLocationsAnnotation: string(b)}
	}
	must(kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}))
}

// assignedTo returns the kcp.io/assigned-locations of ns/name of gvr in the source ("" when
// unassigned, "<gone>" when the object does not exist).
func assignedTo(ctx context.Context, src dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) string {
	u, err := src.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return u.GetAnnotations()[contract.AssignedLocationsAnnotation]
}

// appAssignment returns the assignment of every object of the application (appObjects) and
// whether they are all the same single location (then location is it).
func appAssignment(ctx context.Context, src dynamic.Interface, ns, name string) (location string, together bool, detail string) {
	var parts []string
	first := ""
	together = true
	for i, o := range appObjects(name) {
		a := assignedTo(ctx, src, o.gvr, ns, o.name)
		parts = append(parts, o.String()+"="+a)
		if i == 0 {
			first = a
		}
		together = together && a == first
	}
	locs, err := contract.ParseLocations(first)
	if err != nil || len(locs) != 1 {
		together = false
	} else {
		location = locs[0]
	}
	return location, together, ns + ": " + strings.Join(parts, " ")
}

// appMovedOff reports whether the application name in ns left held as the deletion protocol
// allows while held's mapper is stopped: its Deployment is assigned to one location other than
// held, and each dependency to that location, plus held only while the Deployment still
// carries held's finalizer (docs/dependencies.md: a dependency leaves a location only once no
// object referencing it is assigned there or still being removed there).
func appMovedOff(ctx context.Context, src dynamic.Interface, ns, name, held string) (location string, ok bool, detail string) {
	objs := appObjects(name)
	d, err := src.Resource(objs[0].gvr).Namespace(ns).Get(ctx, objs[0].name, metav1.GetOptions{})
	if err != nil {
		return "", false, ns + "/" + name + ": " + err.Error()
	}
	locs, err := contract.ParseLocations(d.GetAnnotations()[contract.AssignedLocationsAnnotation])
	if err != nil || len(locs) != 1 || locs[0] == held {
		return "", false, fmt.Sprintf("%s: deployments/%s=%v", ns, name, locs)
	}
	location = locs[0]
	holding := slices.Contains(d.GetFinalizers(), contract.LocationFinalizer(held))
	var parts []string
	ok = true
	for _, o := range objs[1:] {
		a := assignedTo(ctx, src, o.gvr, ns, o.name)
		parts = append(parts, o.String()+"="+a)
		deps, err := contract.ParseLocations(a)
		if err != nil || !slices.Contains(deps, location) {
			ok = false
			continue
		}
		for _, l := range deps {
			if l != location && (l != held || !holding) {
				ok = false
			}
		}
	}
	return location, ok, fmt.Sprintf("%s: deployments/%s=%v (holds %s's finalizer: %v) %s", ns, name, locs, held, holding, strings.Join(parts, " "))
}

// groupApps are the applications of each namespace placed as a group.
var groupApps = []string{"web", "api", "worker"}

// groupsTogether returns the locations the applications (groupApps) of the namespaces nss
// are on when each namespace's objects are all on one location, and nil with the first
// namespace whose objects are not.
func groupsTogether(ctx context.Context, src dynamic.Interface, nss []string) (sets.Set[string], string) {
	used := sets.New[string]()
	for _, ns := range nss {
		var nsLoc string
		for _, app := range groupApps {
			loc, together, detail := appAssignment(ctx, src, ns, app)
			if !together || (nsLoc != "" && loc != nsLoc) {
				return nil, detail
			}
			nsLoc = loc
		}
		used.Insert(nsLoc)
	}
	return used, ""
}

// placementGVR is the GroupVersionResource of Placements.
var placementGVR = ctrlplacement.Resource

// appsPlacement returns a Placement of ns named name placing Deployments on one location,
// with the further spec fields of extra.
func appsPlacement(ns, name string, extra map[string]interface{}) *unstructured.Unstructured {
	spec := map[string]interface{}{"locationSelector": map[string]interface{}{}, "numberOfLocations": int64(1), "notReadyTolerance": "15s"}
	for k, v := range extra {
		spec[k] = v
	}
	return newPlacement(ns, name, "apps", "v1", "deployments", spec)
}

// targetUIDs returns the uid of every object of the applications' resources on each target
// in the namespaces nss, by "location resource namespace/name".
func targetUIDs(t *testing.T, ctx context.Context, env *locationsEnv, locations, nss []string) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	for _, l := range locations {
		for _, o := range appObjects("x") {
			for _, ns := range nss {
				list, err := env.tgt[l].Resource(o.gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatalf("listing %s on %s: %v", o.gvr.Resource, l, err)
				}
				for _, item := range list.Items {
					if item.GetLabels()[contract.LocationLabel] != l {
						continue // not the mapper's (the target's own default ServiceAccount)
					}
					out[fmt.Sprintf("%s %s %s/%s", l, o.gvr.Resource, ns, item.GetName())] = item.GetUID()
				}
			}
		}
	}
	return out
}

// TestApplications (Placements place applications, and what a workload references follows
// it; docs/placement.md, docs/dependencies.md) on real servers: a source, mapper-apiserver
// and three targets, each with kube-controller-manager (Deployments get ReplicaSets and Pods
// there, the garbage collector and PVC protection clean up after them) and a mapper, and
// mapper-controller. An application is a Deployment with the
// ConfigMap, Secret, ServiceAccount and PVC its Pod template references, a Service selecting
// its Pods and an HPA targeting it; Placements select only the Deployments and choose one
// location.
//   - 10 namespaces of 3 applications, one Placement each (a group per namespace): each
//     namespace's objects are all on one target, the namespaces spread over the targets, and
//     nothing goes to a registered location that has never been Ready.
//   - 30 applications in one namespace with spreadBy: Object: the Deployments spread, and each
//     application's dependencies are on its own Deployment's target.
//   - A location held (its mapper stopped beyond the tolerance): each group, and each spread
//     application with its dependencies, moves whole.
//   - A ConfigMap shared by two Deployments on different locations is on both, and leaves the
//     one whose Deployment leaves only after that Deployment is gone there.
//   - A hand-assigned ConfigMap keeps its hand-written location; a Widget (a CRD) with a
//     DependencyRule makes its ConfigMap follow the same way; a reference to a ConfigMap that
//     does not exist is an Event and a count; a rule that does not compile says so in its
//     status and changes nothing else.
//   - A Placement naming a resource the source does not serve is Ready=False and blocks no
//     other Placement of its namespace.
//   - mapper-controller killed with SIGKILL while placing new applications, and restarted:
//     every location verifies with 0 violations and no target object was deleted and
//     created again (their uids are kept).
func TestApplications(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	locations := []string{"east", "north", "west"}
	env := startLocationsEnvWith(t, ctx, appsResources, func(dyn dynamic.Interface) { createCRD(t, ctx, dyn, "widgets", "Widget") }, nil, locations...)
	kube := env.source.Admin().Client(t)
	for _, l := range locations {
		// The garbage collector and the PVC protection controller too: a PVC on a target
		// carries kubernetes.io/pvc-protection until no Pod uses it, and the Pods of a deleted
		// Deployment go only with the garbage collector.
		env.targets[l].StartControllerManager(t, "deployment", "replicaset", "garbagecollector", "pvc-protection")
	}
	metricsPort, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctrlArgs := []string{fmt.Sprintf("--bind-address=127.0.0.1:%d", metricsPort),
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}
	ctrlProc := framework.StartMapperController(t, ctx, env.source, 5*time.Second, ctrlArgs...)
	mappers := map[string]*mapperProc{}
	for _, l := range locations {
		mappers[l] = env.startMapper(t, "mapper-"+l, l, nil, locationMapperArgs...)
	}
	for _, l := range locations {
		waitSyncTarget(t, ctx, env.dyn, l, 3*time.Minute, "Ready=True", readyIs(metav1.ConditionTrue, ""))
	}
	// fresh is registered and never Ready (no mapper): it must get no work.
	if _, err := env.dyn.Resource(synctarget.Resource).Create(ctx, newSyncTarget("fresh", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// anchor, assigned by hand everywhere, keeps every view non-empty: a mapper never sweeps
	// orphans from an empty view (docs/mapper.md).
	ensureNamespace(t, ctx, env.src, "anchor")
	if _, err := env.src.Resource(configMapsGVR).Namespace("anchor").Create(ctx, newConfigMap("anchor", "anchor", locations...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var groupNS []string
	for i := range 10 {
		groupNS = append(groupNS, fmt.Sprintf("group-%d", i))
	}
	t.Run("a namespace is one group on one location", func(t *testing.T) {
		for _, ns := range groupNS {
			ensureNamespace(t, ctx, env.src, ns)
			for _, app := range groupApps {
				createApp(t, ctx, kube, ns, app)
			}
			if _, err := env.src.Resource(placementGVR).Namespace(ns).Create(ctx, appsPlacement(ns, "app", nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var used sets.Set[string]
		mapperEventually(t, ctx, 2*time.Minute, "every namespace's applications together on one location", func() (bool, string) {
			var detail string
			used, detail = groupsTogether(ctx, env.src, groupNS)
			return used != nil, detail
		})
		if used.Has("fresh") {
			t.Errorf("a group went to fresh, which has never been Ready")
		}
		if used.Len() < 2 {
			t.Errorf("the 10 namespaces are all on %v: groups do not spread", sets.List(used))
		}
		env.converge(t, ctx, "placing 10 namespaces", locations...)
		mapperEventually(t, ctx, time.Minute, "group-0's Placement counts 1 group of 3 objects", func() (bool, string) {
			pl, err := env.src.Resource(placementGVR).Namespace("group-0").Get(ctx, "app", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			g, _, _ := unstructured.NestedInt64(pl.Object, "status", "placedGroups")
			o, _, _ := unstructured.NestedInt64(pl.Object, "status", "placedObjects")
			return g == 1 && o == 3, fmt.Sprintf("groups %d, objects %d", g, o)
		})
		out, err := framework.RunKubectl(t, env.source.AdminKubeconfig(), "get", "placements", "-n", "group-0")
		if err != nil || !strings.Contains(out, "GROUPS") || !strings.Contains(out, "OBJECTS") {
			t.Errorf("kubectl get placements shows no GROUPS and OBJECTS: %v\n%s", err, out)
		}
	})

	const spreadNS = "spread"
	var spreadApps []string
	for i := range 30 {
		spreadApps = append(spreadApps, fmt.Sprintf("app-%02d", i))
	}
	t.Run("spreadBy Object: each application on its own, with its dependencies", func(t *testing.T) {
		ensureNamespace(t, ctx, env.src, spreadNS)
		for _, app := range spreadApps {
			createApp(t, ctx, kube, spreadNS, app)
		}
		if _, err := env.src.Resource(placementGVR).Namespace(spreadNS).Create(ctx, appsPlacement(spreadNS, "spread", map[string]interface{}{"spreadBy": "Object"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		used := sets.New[string]()
		mapperEventually(t, ctx, 2*time.Minute, "each application's objects on its Deployment's location", func() (bool, string) {
			used.Clear()
			for _, app := range spreadApps {
				loc, together, detail := appAssignment(ctx, env.src, spreadNS, app)
				if !together {
					return false, detail
				}
				used.Insert(loc)
			}
			return true, ""
		})
		if used.Len() != 3 {
			t.Errorf("30 applications spread over %v, want all 3 locations", sets.List(used))
		}
		env.converge(t, ctx, "placing 30 applications one by one", locations...)
	})

	t.Run("a held location: groups and applications move whole", func(t *testing.T) {
		// The location holding group-0.
		held, _, _ := appAssignment(ctx, env.src, "group-0", "web")
		var onHeld []string
		for _, app := range spreadApps {
			if loc, _, _ := appAssignment(ctx, env.src, spreadNS, app); loc == held {
				onHeld = append(onHeld, app)
			}
		}
		if err := mappers[held].proc.Stop(); err != nil {
			t.Fatal(err)
		}
		// While held's mapper is stopped its copies stay, so the moved Deployments keep held's
		// finalizer and their dependencies stay assigned there too (the deletion protocol):
		// moving whole means every Deployment of a group on one new location with its
		// dependencies, which leave held once its mapper has deleted the Deployments' copies.
		mapperEventually(t, ctx, 2*time.Minute, "group-0 and the spread applications on "+held+" moved whole", func() (bool, string) {
			groupLoc := ""
			for _, app := range groupApps {
				loc, ok, detail := appMovedOff(ctx, env.src, "group-0", app, held)
				if !ok || (groupLoc != "" && loc != groupLoc) {
					return false, detail
				}
				groupLoc = loc
			}
			for _, app := range onHeld {
				if _, ok, detail := appMovedOff(ctx, env.src, spreadNS, app, held); !ok {
					return false, detail
				}
			}
			return true, ""
		})
		mappers[held].restart()
		waitSyncTarget(t, ctx, env.dyn, held, 3*time.Minute, "Ready=True again", readyIs(metav1.ConditionTrue, ""))
		mapperEventually(t, ctx, 2*time.Minute, "the dependencies left "+held+" once its copies were deleted", func() (bool, string) {
			if used, detail := groupsTogether(ctx, env.src, groupNS); used == nil {
				return false, detail
			}
			for _, app := range onHeld {
				if loc, together, detail := appAssignment(ctx, env.src, spreadNS, app); !together || loc == held {
					return false, detail
				}
			}
			return true, ""
		})
		env.converge(t, ctx, "moving off "+held, locations...)
	})

	t.Run("a shared ConfigMap is on both locations and leaves after its Deployment", func(t *testing.T) {
		const ns = "shared"
		ensureNamespace(t, ctx, env.src, ns)
		cm := newConfigMap(ns, "common")
		if _, err := env.src.Resource(configMapsGVR).Namespace(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for name, loc := range map[string]string{"a": "east", "b": "west"} {
			d := newDeployment(ns, name, loc)
			spec := d.Object["spec"].(map[string]interface{})["template"].(map[string]interface{})["spec"].(map[string]interface{})
			spec["volumes"] = []interface{}{map[string]interface{}{"name": "c", "configMap": map[string]interface{}{"name": "common"}}}
			if _, err := env.src.Resource(deploymentsGVR).Namespace(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		mapperEventually(t, ctx, time.Minute, "common on east and west", func() (bool, string) {
			a := assignedTo(ctx, env.src, configMapsGVR, ns, "common")
			return a == `["east","west"]`, a
		})
		env.converge(t, ctx, "sharing a ConfigMap", "east", "west")
		// Watch west from now: b's Deployment must be gone there before common is.
		w, err := env.tgt["west"].Resource(configMapsGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		dw, err := env.tgt["west"].Resource(deploymentsGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer dw.Stop()
		env.mutate(t, ctx, deploymentsGVR, ns, "b", func(u *unstructured.Unstructured) { setAssignment(u, "north") })
		mapperEventually(t, ctx, time.Minute, "common on east and north", func() (bool, string) {
			a := assignedTo(ctx, env.src, configMapsGVR, ns, "common")
			return a == `["east","north"]`, a
		})
		// Both deletions happen on west's kube-apiserver: the resourceVersions of their
		// DELETED events (etcd revisions) order them.
		deletedAt := func(events <-chan watch.Event, name string) int64 {
			t.Helper()
			timeout := time.After(time.Minute)
			for {
				select {
				case ev, ok := <-events:
					if !ok {
						t.Fatalf("the watch of west ended before %s left", name)
					}
					if u, isU := ev.Object.(*unstructured.Unstructured); isU && ev.Type == watch.Deleted && u.GetName() == name {
						rv, err := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
						if err != nil {
							t.Fatal(err)
						}
						return rv
					}
				case <-timeout:
					t.Fatalf("%s never left west", name)
				}
			}
		}
		commonGone, bGone := deletedAt(w.ResultChan(), "common"), deletedAt(dw.ResultChan(), "b")
		if commonGone < bGone {
			t.Errorf("common left west (resourceVersion %d) before b's Deployment (%d)", commonGone, bGone)
		}
		env.converge(t, ctx, "moving one of two Deployments", locations...)
	})

	t.Run("hand-written locations stay; a DependencyRule makes a Widget's ConfigMap follow", func(t *testing.T) {
		const ns = "hand"
		ensureNamespace(t, ctx, env.src, ns)
		for _, name := range []string{"web-config", "widget-config"} {
			if _, err := env.src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, name, "east"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		d := newDeployment(ns, "web", "north")
		spec := d.Object["spec"].(map[string]interface{})["template"].(map[string]interface{})["spec"].(map[string]interface{})
		spec["volumes"] = []interface{}{map[string]interface{}{"name": "c", "configMap": map[string]interface{}{"name": "web-config"}}}
		if _, err := env.src.Resource(deploymentsGVR).Namespace(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rules := env.src.Resource(ctrldependencies.RuleResource)
		rule := func(name, expression string) *unstructured.Unstructured {
			return &unstructured.Unstructured{Object: map[string]interface{}{
				"apiVersion": controlv1alpha1.SchemeGroupVersion.String(), "kind": "DependencyRule",
				"metadata": map[string]interface{}{"name": name},
				"spec": map[string]interface{}{
					"resource":   map[string]interface{}{"group": "example.com", "version": "v1", "resource": "widgets"},
					"expression": expression,
				},
			}}
		}
		if _, err := rules.Create(ctx, rule("widgets", `object.spec.?configMaps.orValue([]).map(n, "configmaps/" + n)`), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := rules.Create(ctx, rule("broken", `["configmaps/" + object.spec.configMap`), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		widget := newWidget(widgetsGVR, "Widget", ns, "gizmo", "north")
		widget.Object["spec"].(map[string]interface{})["configMaps"] = []interface{}{"widget-config", "not-there"}
		if _, err := env.src.Resource(widgetsGVR).Namespace(ns).Create(ctx, widget, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		mapperEventually(t, ctx, time.Minute, "both ConfigMaps on their hand-written east and their referrers' north", func() (bool, string) {
			a, b := assignedTo(ctx, env.src, configMapsGVR, ns, "web-config"), assignedTo(ctx, env.src, configMapsGVR, ns, "widget-config")
			return a == `["east","north"]` && b == `["east","north"]`, a + " " + b
		})
		mapperEventually(t, ctx, time.Minute, "the rule that does not compile says so", func() (bool, string) {
			u, err := rules.Get(ctx, "broken", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			var r controlv1alpha1.DependencyRule
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(r.Status.Conditions, controlv1alpha1.DependencyRuleReady)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == controlv1alpha1.ReasonCompilationFailed, fmt.Sprintf("%+v", r.Status)
		})
		waitObjectEvent(t, ctx, env.src, "Widget", "gizmo", "MissingDependency", "not-there")
		env.converge(t, ctx, "following a Deployment and a Widget", locations...)

		// Unassigned referrers: the ConfigMaps keep only their hand-written east.
		env.mutate(t, ctx, deploymentsGVR, ns, "web", func(u *unstructured.Unstructured) { setAssignment(u) })
		env.mutate(t, ctx, widgetsGVR, ns, "gizmo", func(u *unstructured.Unstructured) { setAssignment(u) })
		mapperEventually(t, ctx, time.Minute, "both ConfigMaps back on east alone", func() (bool, string) {
			a, b := assignedTo(ctx, env.src, configMapsGVR, ns, "web-config"), assignedTo(ctx, env.src, configMapsGVR, ns, "widget-config")
			return a == `["east"]` && b == `["east"]`, a + " " + b
		})
		env.converge(t, ctx, "unassigning the referrers", locations...)
	})

	t.Run("a Placement of a resource the source does not serve blocks nothing", func(t *testing.T) {
		const ns = "group-0"
		bad := newPlacement(ns, "typo", "apps", "v1", "deployment", map[string]interface{}{"locationSelector": map[string]interface{}{}})
		if _, err := env.src.Resource(placementGVR).Namespace(ns).Create(ctx, bad, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		mapperEventually(t, ctx, time.Minute, "the Placement reports ResourceNotServed", func() (bool, string) {
			u, err := env.src.Resource(placementGVR).Namespace(ns).Get(ctx, "typo", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			return strings.Contains(fmt.Sprint(conds), controlv1alpha1.ReasonResourceNotServed) && strings.Contains(fmt.Sprint(conds), "deployments"), fmt.Sprint(conds)
		})
		createApp(t, ctx, kube, ns, "late")
		mapperEventually(t, ctx, time.Minute, "a new application of the namespace is placed with its group", func() (bool, string) {
			loc, together, detail := appAssignment(ctx, env.src, ns, "late")
			web, _, _ := appAssignment(ctx, env.src, ns, "web")
			return together && loc == web, detail
		})
	})

	t.Run("SIGKILL of mapper-controller while placing: nothing deleted, 0 violations", func(t *testing.T) {
		env.converge(t, ctx, "before the kill", locations...)
		allNS := append([]string{spreadNS, "shared", "hand"}, groupNS...)
		before := targetUIDs(t, ctx, env, locations, allNS)
		var newNS []string
		for i := range 4 {
			ns := fmt.Sprintf("late-%d", i)
			newNS = append(newNS, ns)
			ensureNamespace(t, ctx, env.src, ns)
			for _, app := range groupApps {
				createApp(t, ctx, kube, ns, app)
			}
		}
		for _, ns := range newNS {
			if _, err := env.src.Resource(placementGVR).Namespace(ns).Create(ctx, appsPlacement(ns, "app", nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Kill as soon as the first new Deployment is placed: its dependencies are then being
		// assigned, the other namespaces not yet placed.
		mapperEventually(t, ctx, time.Minute, "a first new Deployment placed", func() (bool, string) {
			for _, ns := range newNS {
				if a := assignedTo(ctx, env.src, deploymentsGVR, ns, "web"); a != "" {
					return true, a
				}
			}
			return false, "none yet"
		})
		if err := syscall.Kill(-ctrlProc.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-ctrlProc.Exited()
		placedAtKill := 0
		for _, ns := range newNS {
			for _, app := range groupApps {
				if _, together, _ := appAssignment(ctx, env.src, ns, app); together {
					placedAtKill++
				}
			}
		}
		t.Logf("killed mapper-controller with %d of %d new applications placed whole", placedAtKill, 3*len(newNS))
		ctrlProc = framework.StartMapperController(t, ctx, env.source, 5*time.Second, ctrlArgs...)
		mapperEventually(t, ctx, 2*time.Minute, "every new namespace's applications together on one location", func() (bool, string) {
			used, detail := groupsTogether(ctx, env.src, newNS)
			return used != nil, detail
		})
		env.converge(t, ctx, "the restart", locations...)
		after := targetUIDs(t, ctx, env, locations, allNS)
		var changed []string
		for k, uid := range before {
			if after[k] != uid {
				changed = append(changed, fmt.Sprintf("%s: %s -> %q", k, uid, after[k]))
			}
		}
		sort.Strings(changed)
		if len(changed) > 0 {
			t.Errorf("%d target objects were deleted or created again across the restart:\n%s", len(changed), strings.Join(changed, "\n"))
		}
		if len(before) == 0 || !slices.ContainsFunc(sets.List(sets.KeySet(before)), func(k string) bool { return strings.Contains(k, "configmaps") }) {
			t.Errorf("no ConfigMap on any target before the kill: %d objects", len(before))
		}
	})
}

// waitObjectEvent waits for an Event with reason about the object kind/name whose note
// contains text.
func waitObjectEvent(t *testing.T, ctx context.Context, dyn dynamic.Interface, kind, name, reason, text string) {
	t.Helper()
	mapperEventually(t, ctx, time.Minute, fmt.Sprintf("an Event %s about %s %s", reason, kind, name), func() (bool, string) {
		list, err := dyn.Resource(eventsGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			k, _, _ := unstructured.NestedString(e.Object, "regarding", "kind")
			n, _, _ := unstructured.NestedString(e.Object, "regarding", "name")
			r, _, _ := unstructured.NestedString(e.Object, "reason")
			note, _, _ := unstructured.NestedString(e.Object, "note")
			if k == kind && n == name && r == reason && strings.Contains(note, text) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Events", len(list.Items))
	})
}
