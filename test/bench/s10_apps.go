package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	ctrlplacement "github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
)

// objectsPerApp is the size of one application of scenario 10: a Deployment and what its Pod
// template references (a ConfigMap, a Secret, a ServiceAccount) or selects it (a Service).
const objectsPerApp = 5

// appResources are the resources of an application of scenario 10, its Deployment first.
var appResources = []schema.GroupVersionResource{
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "secrets"},
	{Version: "v1", Resource: "serviceaccounts"},
	{Version: "v1", Resource: "services"},
}

// appName is the name of the k-th application of a namespace; its dependencies' names add a
// suffix (see appDependency).
func appName(k int) string { return fmt.Sprintf("app-%05d", k) }

// appDependency is the name of the object of resource appResources[i] (i > 0) of app.
func appDependency(app string, i int) string {
	switch i {
	case 1:
		return app + "-config"
	case 2:
		return app + "-secret"
	case 3:
		return app + "-sa"
	}
	return app
}

// createApps creates namespaces placementNamespace(0..p-1) with perNS applications each, no
// object assigned, with cfg.LoadClients parallel clients.
func (e *env) createApps(ctx context.Context, p, perNS int) {
	for i := range p {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: placementNamespace(i)}}
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			e.tb.Fatal(err)
		}
	}
	jobs := make(chan [2]int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range e.cfg.LoadClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := e.createApp(ctx, placementNamespace(j[0]), appName(j[1])); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range p {
		for k := range perNS {
			jobs <- [2]int{i, k}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		e.tb.Fatal(firstErr)
	}
}

// createApp creates the application app in ns: its dependencies, then its Deployment.
func (e *env) createApp(ctx context.Context, ns, app string) error {
	labels := map[string]string{"app": app}
	create := func(_ interface{}, err error) error {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	core := e.kube.CoreV1()
	for _, err := range []error{
		create(core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: appDependency(app, 1)}, Data: map[string]string{"k": strings.Repeat("v", 64)}}, metav1.CreateOptions{})),
		create(core.Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: appDependency(app, 2)}, StringData: map[string]string{"token": strings.Repeat("t", 32)}}, metav1.CreateOptions{})),
		create(core.ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: appDependency(app, 3)}}, metav1.CreateOptions{})),
		create(core.Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: app},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})),
		create(e.kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app, Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					ServiceAccountName: appDependency(app, 3),
					Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1",
						EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: appDependency(app, 2)}}}}}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: appDependency(app, 1)}}}}},
				}}}}, metav1.CreateOptions{})),
	} {
		if err != nil {
			return fmt.Errorf("creating application %s/%s: %w", ns, app, err)
		}
	}
	return nil
}

// appTracker follows the assignments of scenario 10's objects with metadata informers in the
// bench process (their initial lists are made before the measurement starts).
type appTracker struct {
	informers []toolscache.SharedIndexInformer
	p, perNS  int
}

// trackApps starts the tracker's informers and waits until they have synced.
func (e *env) trackApps(ctx context.Context, client metadata.Interface, p, perNS int) *appTracker {
	factory := metadatainformer.NewSharedInformerFactory(client, 0)
	t := &appTracker{p: p, perNS: perNS}
	for _, gvr := range appResources {
		t.informers = append(t.informers, factory.ForResource(gvr).Informer())
	}
	factory.Start(ctx.Done())
	for _, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			e.tb.Fatal("the informers of scenario 10's objects did not sync")
		}
	}
	return t
}

// assignment returns the assignment of ns/name of appResources[i] and its placement owner;
// found is false when the informer does not hold it.
func (t *appTracker) assignment(i int, ns, name string) (locations, owner string, found bool) {
	obj, found, _ := t.informers[i].GetIndexer().GetByKey(ns + "/" + name)
	if !found {
		return "", "", false
	}
	m := obj.(*metav1.PartialObjectMetadata)
	return m.Annotations[contract.AssignedLocationsAnnotation], m.Annotations[ctrlplacement.OwnerAnnotation], true
}

// check returns how many applications are placed whole (the Deployment on want locations by
// the Placement owner, each dependency on exactly the Deployment's locations and none of them
// the location avoid) and the first few that are not, by "namespace/app".
func (t *appTracker) check(want int, owner, avoid string) (placed int, wrong map[string]string) {
	wrong = map[string]string{}
	for i := range t.p {
		ns := placementNamespace(i)
		for k := range t.perNS {
			app := appName(k)
			locs, by, _ := t.assignment(0, ns, app)
			parsed, err := contract.ParseLocations(locs)
			ok := err == nil && len(parsed) == want && by == owner && (avoid == "" || !strings.Contains(locs, `"`+avoid+`"`))
			for d := 1; ok && d < len(appResources); d++ {
				dl, _, _ := t.assignment(d, ns, appDependency(app, d))
				ok = dl == locs
			}
			if ok {
				placed++
			} else if len(wrong) < 5 {
				wrong[ns+"/"+app] = fmt.Sprintf("deployment %s by %q", locs, by)
			}
		}
	}
	return placed, wrong
}

// waitPlaced polls check every 0.5 s until every application is placed whole or timeout
// passes; it returns when they were (zero when not), calling sample at each poll.
func (t *appTracker) waitPlaced(ctx context.Context, want int, owner, avoid string, timeout time.Duration, sample func()) time.Time {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if sample != nil {
			sample()
		}
		if placed, _ := t.check(want, owner, avoid); placed == t.p*t.perNS {
			return time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
	return time.Time{}
}
