package bench

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// Scenario 2's watch set: objects of the eight resources besides ConfigMaps and Deployments
// (benchResources), so that each location has objects in each of the 10 mirrored resources and
// its 10 watches all get events. It lives in a few namespaces of its own and is created in
// scenario 2, after scenarios 5, 4 and 1 measured the data set; scenarios 1, 3, 7 and 9 watch and
// list ConfigMaps only, so they do not see it.
const (
	// watchNamespaceCount is the number of namespaces of the watch set.
	watchNamespaceCount = 10
	// RevAnnotation is the annotation a data write changes on objects other than ConfigMaps
	// (which change data.rev): every kind has metadata, not every kind has data.
	RevAnnotation = "bench.kcp.io/rev"
)

// addWatchSet generates the watch set into d (once): for each of the eight resources, one object
// per location, owned by that location and assigned to it and to 0-2 more random ones (1-3
// locations, as the data set's objects), so that every location has at least one object of
// every resource.
func (d *dataset) addWatchSet() {
	if len(d.watchSet) > 0 {
		return
	}
	r := rand.New(rand.NewSource(d.cfg.Seed*7_919 + 2))
	for i := 0; i < watchNamespaceCount; i++ {
		d.watchNamespaces = append(d.watchNamespaces, fmt.Sprintf("watch-%02d", i))
	}
	for _, res := range benchResources {
		if res.kind == kindConfigMap || res.kind == kindDeployment {
			continue
		}
		for j, owner := range d.locations {
			set := map[string]bool{owner: true}
			n := min(1+r.Intn(3), len(d.locations))
			for len(set) < n {
				set[d.locations[r.Intn(len(d.locations))]] = true
			}
			locs := make([]string, 0, n)
			for l := range set {
				locs = append(locs, l)
			}
			sort.Strings(locs)
			d.watchSet = append(d.watchSet, len(d.objects))
			d.objects = append(d.objects, &object{kind: res.kind, namespace: d.watchNamespaces[j%watchNamespaceCount],
				name: fmt.Sprintf("%s-%05d", shortName(res.kind), j), locs: locs})
		}
	}
}

// shortName is the name prefix of watch-set objects of kind k.
func shortName(k kind) string {
	return map[kind]string{kindSecret: "secret", kindServiceAccount: "sa", kindService: "svc", kindPVC: "pvc",
		kindPodTemplate: "pt", kindStatefulSet: "sts", kindCronJob: "cj", kindRole: "role"}[k]
}

// indexesByResource returns, in the order of benchResources, the indexes in objects of the
// objects of each resource (ConfigMaps and Deployments of the data set, the others of the watch
// set).
func (d *dataset) indexesByResource() [][]int {
	out := make([][]int, len(benchResources))
	for i, o := range d.objects {
		for j, res := range benchResources {
			if res.kind == o.kind {
				out[j] = append(out[j], i)
			}
		}
	}
	return out
}

// resourceWrites spreads writes evenly over the resources of benchResources: a resource, then one
// of its objects, at random; assignPercent of the writes change the object's assignment, the
// others its data (a ConfigMap's data.rev, the annotation RevAnnotation of any other kind).
func (e *env) resourceWrites(assignPercent int) writePlan {
	byResource := e.ds.indexesByResource()
	return func(r *rand.Rand) writeJob {
		idxs := byResource[r.Intn(len(byResource))]
		return writeJob{idx: idxs[r.Intn(len(idxs))], assign: r.Intn(100) < assignPercent}
	}
}

// watchSetResult describes how the watch set was created.
type watchSetResult struct {
	objects int
	seconds float64
}

// createWatchSet creates the watch set on the source with cfg.LoadClients parallel requests and
// waits until mapper-apiserver's cache of each resource has reached the last creation.
func (e *env) createWatchSet(ctx context.Context) watchSetResult {
	e.ds.addWatchSet()
	start := time.Now()
	for _, ns := range e.ds.watchNamespaces {
		_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			e.tb.Fatalf("creating namespace %s: %v", ns, err)
		}
	}
	var (
		next     atomic.Int64
		mu       sync.Mutex
		firstErr error
		lastRV   = map[string]uint64{}
		wg       sync.WaitGroup
	)
	for w := 0; w < e.cfg.LoadClients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(e.ds.watchSet) || ctx.Err() != nil {
					return
				}
				o := e.ds.objects[e.ds.watchSet[i]]
				res := resourceOf(o.kind)
				var created *unstructured.Unstructured
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					created, err = e.dyn.Resource(res.gvr).Namespace(o.namespace).Create(ctx, e.ds.watchObject(e.ds.watchSet[i]), metav1.CreateOptions{})
					if err == nil {
						break
					}
					time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("%s %s/%s: %w", res.name, o.namespace, o.name, err)
				}
				if err == nil {
					rv, _ := strconv.ParseUint(created.GetResourceVersion(), 10, 64)
					lastRV[res.name] = max(lastRV[res.name], rv)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		e.tb.Fatalf("creating the watch set: %v", firstErr)
	}
	// The view's cache of each resource must hold the watch set before watches start from its
	// current resourceVersion (else the creations would reach the watches as events).
	deadline := time.Now().Add(2 * time.Minute)
	for _, res := range benchResources {
		for e.currentRVOf(ctx, true, res) < lastRV[res.name] {
			if time.Now().After(deadline) {
				e.tb.Fatalf("mapper-apiserver's cache of %s did not reach resourceVersion %d", res.name, lastRV[res.name])
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return watchSetResult{objects: len(e.ds.watchSet), seconds: time.Since(start).Seconds()}
}

// watchObject renders watch-set object i as an unstructured object of its kind, with the
// labels and assignment annotation of the data set's objects.
func (d *dataset) watchObject(i int) *unstructured.Unstructured {
	o := d.objects[i]
	r := rand.New(rand.NewSource(d.cfg.Seed*1_000_003 + int64(i)))
	meta := metav1.ObjectMeta{
		Name:        o.name,
		Namespace:   o.namespace,
		Labels:      labelsFor(o.locs, o.name),
		Annotations: map[string]string{contract.AssignedLocationsAnnotation: assignment(o.locs)},
	}
	sel := map[string]string{"app": o.name}
	var obj runtime.Object
	switch o.kind {
	case kindSecret:
		obj = &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: meta, Type: corev1.SecretTypeOpaque,
			StringData: map[string]string{"username": fmt.Sprintf("svc-%s", o.name), "password": fmt.Sprintf("%x", r.Int63()), "config.yaml": payload(r, 200+r.Intn(300))}}
	case kindServiceAccount:
		obj = &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta,
			AutomountServiceAccountToken: ptr.To(false), ImagePullSecrets: []corev1.LocalObjectReference{{Name: fmt.Sprintf("registry-team-%02d", r.Intn(40))}}}
	case kindService:
		obj = &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: meta,
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: sel,
				Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)}}}}
	case kindPVC:
		obj = &corev1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}, ObjectMeta: meta,
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(fmt.Sprintf("%dGi", 1+r.Intn(20)))}}}}
	case kindPodTemplate:
		obj = &corev1.PodTemplate{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodTemplate"}, ObjectMeta: meta,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: watchPodSpec(r, o.name, corev1.RestartPolicyAlways)}}
	case kindStatefulSet:
		obj = &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}, ObjectMeta: meta,
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](int32(1 + r.Intn(3))), ServiceName: o.name, Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: watchPodSpec(r, o.name, corev1.RestartPolicyAlways)}}}
	case kindCronJob:
		obj = &batchv1.CronJob{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"}, ObjectMeta: meta,
			Spec: batchv1.CronJobSpec{Schedule: fmt.Sprintf("%d * * * *", r.Intn(60)), JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: watchPodSpec(r, o.name, corev1.RestartPolicyOnFailure)}}}}}
	case kindRole:
		obj = &rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: meta,
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
			}}
	default:
		panic(fmt.Sprintf("no watch-set object of kind %d", o.kind))
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: u}
}

// watchPodSpec is the pod spec of the watch set's workloads, smaller than a data-set
// Deployment's.
func watchPodSpec(r *rand.Rand, name string, restart corev1.RestartPolicy) corev1.PodSpec {
	return corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{
		Name:  "app",
		Image: fmt.Sprintf("registry.example.com/team-%02d/%s:1.%d.%d", r.Intn(40), name, r.Intn(20), r.Intn(20)),
		Args:  []string{"--config=/etc/app/config.yaml"},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
	}}}
}
