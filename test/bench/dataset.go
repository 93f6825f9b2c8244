package bench

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"strings"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Names of the data set.
const (
	// BulkLocation is the location scenario 6 maps onto a target cluster.
	BulkLocation = "bulk"
	// LocationLabelPrefix prefixes the label that marks each assigned location, so that
	// kube-apiserver can serve the same selection by label selector.
	LocationLabelPrefix = "bench.kcp.io/loc-"
	// AppLabel marks every object of the data set.
	AppLabel = "bench.kcp.io/app"
)

// kind of a data-set or watch-set object (benchResources names the resource of each).
type kind int

const (
	kindConfigMap kind = iota
	kindDeployment
	// The kinds of scenario 2's watch set only (watchset.go).
	kindSecret
	kindServiceAccount
	kindService
	kindPVC
	kindPodTemplate
	kindStatefulSet
	kindCronJob
	kindRole
)

// object is one object of the data set with its current assignment. The writers of scenarios
// 2, 3 and 7 change locs; one writer owns an object at a time.
type object struct {
	kind      kind
	namespace string
	name      string
	// locs is the sorted list of assigned locations.
	locs []string
	// rev counts data writes.
	rev int
}

// dataset is the generated data set.
type dataset struct {
	cfg        Config
	namespaces []string
	locations  []string // regular locations l0000..; BulkLocation is extra
	// objects are the data set's ConfigMaps and Deployments, followed, once scenario 2 added it
	// (addWatchSet), by its watch set.
	objects []*object
	// configMaps are the indexes of the data set's ConfigMaps in objects.
	configMaps []int
	// watchNamespaces and watchSet (indexes in objects) are scenario 2's watch set; empty
	// before addWatchSet.
	watchNamespaces []string
	watchSet        []int
}

// locationName returns the name of regular location i.
func locationName(i int) string { return fmt.Sprintf("l%04d", i) }

// locationNames returns the names of the first n locations (locationName).
func locationNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = locationName(i)
	}
	return names
}

// LocationLabel returns the label that marks objects assigned to location.
func LocationLabel(location string) string { return LocationLabelPrefix + location }

// newDataset generates the data set of cfg deterministically from cfg.Seed.
func newDataset(cfg Config) *dataset {
	r := rand.New(rand.NewSource(cfg.Seed))
	d := &dataset{cfg: cfg}
	for i := 0; i < cfg.Namespaces; i++ {
		d.namespaces = append(d.namespaces, fmt.Sprintf("vc-%04d", i))
	}
	for i := 0; i < cfg.Locations; i++ {
		d.locations = append(d.locations, locationName(i))
	}
	bulk := min(cfg.BulkObjects, cfg.Objects)
	bulkEvery := 0
	if bulk > 0 {
		bulkEvery = cfg.Objects / bulk
	}
	depEvery := 0
	if cfg.DeploymentPercent > 0 {
		depEvery = 100 / cfg.DeploymentPercent
	}
	bulkAssigned := 0
	for i := 0; i < cfg.Objects; i++ {
		o := &object{namespace: d.namespaces[i%len(d.namespaces)]}
		if depEvery > 0 && i%depEvery == depEvery-1 {
			o.kind = kindDeployment
			o.name = fmt.Sprintf("dep-%06d", i)
		} else {
			o.kind = kindConfigMap
			o.name = fmt.Sprintf("cm-%06d", i)
			d.configMaps = append(d.configMaps, i)
		}
		o.locs = d.randomLocations(r)
		if bulkEvery > 0 && i%bulkEvery == bulkEvery-1 && bulkAssigned < bulk {
			o.locs = sortedUnique(append(o.locs, BulkLocation))
			bulkAssigned++
		}
		d.objects = append(d.objects, o)
	}
	return d
}

// randomLocations picks 1 to 3 distinct regular locations.
func (d *dataset) randomLocations(r *rand.Rand) []string {
	n := 1 + r.Intn(3)
	n = min(n, len(d.locations))
	set := map[string]bool{}
	for len(set) < n {
		set[d.locations[r.Intn(len(d.locations))]] = true
	}
	out := make([]string, 0, n)
	for l := range set {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

func sortedUnique(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// assignment returns the kcp.io/assigned-locations annotation value for locs.
func assignment(locs []string) string {
	b, _ := json.Marshal(locs)
	return string(b)
}

// labelsFor returns the labels of an object assigned to locs.
func labelsFor(locs []string, app string) map[string]string {
	l := map[string]string{AppLabel: app}
	for _, loc := range locs {
		l[LocationLabel(loc)] = ""
	}
	return l
}

// payload returns a realistic configuration file of n bytes or a little more.
func payload(r *rand.Rand, n int) string {
	var b strings.Builder
	sections := []string{"server", "database", "cache", "features", "logging", "tracing"}
	for b.Len() < n {
		s := sections[r.Intn(len(sections))]
		fmt.Fprintf(&b, "%s:\n  host: %s-%d.svc.cluster.local\n  port: %d\n  timeout: %dms\n  enabled: %t\n",
			s, s, r.Intn(100), 1024+r.Intn(60000), 50+r.Intn(5000), r.Intn(2) == 0)
	}
	return b.String()
}

// configMap renders object i as a ConfigMap of about 1-2 KiB (as stored, with managedFields).
func (d *dataset) configMap(i int) *corev1.ConfigMap {
	o := d.objects[i]
	r := rand.New(rand.NewSource(d.cfg.Seed*1_000_003 + int64(i)))
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:        o.name,
			Namespace:   o.namespace,
			Labels:      labelsFor(o.locs, o.name),
			Annotations: map[string]string{contract.AssignedLocationsAnnotation: assignment(o.locs)},
		},
		Data: map[string]string{
			"config.yaml": payload(r, 500+r.Intn(700)),
			"owner":       fmt.Sprintf("team-%02d@example.com", r.Intn(40)),
			"rev":         "0",
		},
	}
}

// deployment renders object i as a Deployment of about 2 KiB.
func (d *dataset) deployment(i int) *appsv1.Deployment {
	o := d.objects[i]
	r := rand.New(rand.NewSource(d.cfg.Seed*1_000_003 + int64(i)))
	sel := map[string]string{"app": o.name}
	var env []corev1.EnvVar
	for j := 0; j < 6; j++ {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", j), Value: fmt.Sprintf("value-%x", r.Int63())})
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:        o.name,
			Namespace:   o.namespace,
			Labels:      labelsFor(o.locs, o.name),
			Annotations: map[string]string{contract.AssignedLocationsAnnotation: assignment(o.locs)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](int32(1 + r.Intn(3))),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "app",
					Image: fmt.Sprintf("registry.example.com/team-%02d/%s:1.%d.%d", r.Intn(40), o.name, r.Intn(20), r.Intn(20)),
					Args:  []string{"--config=/etc/app/config.yaml", "--port=8080"},
					Env:   env,
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
					},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
				}}},
			},
		},
	}
}

// locationObjects returns the indexes of the objects of kind k assigned to location.
func (d *dataset) locationObjects(location string, k kind) []int {
	var out []int
	for i, o := range d.objects {
		if o.kind == k && hasString(o.locs, location) {
			out = append(out, i)
		}
	}
	return out
}

// countAssigned returns how many objects are assigned to location.
func (d *dataset) countAssigned(location string) int {
	n := 0
	for _, o := range d.objects {
		if hasString(o.locs, location) {
			n++
		}
	}
	return n
}

func hasString(s []string, x string) bool {
	i := sort.SearchStrings(s, x)
	return i < len(s) && s[i] == x
}
