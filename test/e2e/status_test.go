package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

const (
	statusPolicyAnnotation   = "kcp.io/status-policy"
	statusLocationAnnotation = "kcp.io/status-location"
	statusRecordPrefix       = "status.kcp.io/"
)

// reflect opts obj in to status write-back.
func reflectStatus(obj *unstructured.Unstructured) *unstructured.Unstructured {
	ann := obj.GetAnnotations()
	ann[statusPolicyAnnotation] = "Reflect"
	obj.SetAnnotations(ann)
	return obj
}

// statusEnv is a source with the "things" CRD (with a status subresource) and a
// mapper-apiserver mirroring configmaps, deployments and things.
type statusEnv struct {
	*viewEnv
}

var thingsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "things"}

func startStatusEnv(t *testing.T, ctx context.Context) *statusEnv {
	t.Helper()
	source, src := startSource(t)
	createCRD(t, ctx, src, "things", "Thing")
	ensureNamespace(t, ctx, src, "apps")
	env := &viewEnv{source: source, src: src, views: map[string]dynamic.Interface{}}
	env.server = framework.StartMapperAPIServer(t, source, "--resources=deployments.apps,things.example.com", "--source-discovery-interval=1s")
	env.connectViews(t, "east", "west")
	return &statusEnv{env}
}

// viewGet waits until location's view holds the object at (at least) the source's
// resourceVersion rv, and returns it.
func (e *statusEnv) viewGet(t *testing.T, ctx context.Context, location string, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := e.views[location].Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("GET %s/%s through %s's view: %v", ns, name, location, err)
	}
	return obj
}

// TestStatusWriteBack proves status write-back through location views against a real source.
func TestStatusWriteBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startStatusEnv(t, ctx)
	// mapper-controller keeps the status records in step (folds, removals); mapper-apiserver
	// writes to the source only the status written through its views.
	framework.StartMapperController(t, ctx, env.source, time.Minute, append(framework.MapperAPIServerArgs(t, env.server), "--controllers=statusrecords")...)

	t.Run("single location", func(t *testing.T) { testStatusSingleLocation(t, ctx, env) })
	t.Run("patch types", func(t *testing.T) { testStatusPatchTypes(t, ctx, env) })
	t.Run("refusals", func(t *testing.T) { testStatusRefusals(t, ctx, env) })
	t.Run("several locations", func(t *testing.T) { testStatusSeveralLocations(t, ctx, env) })
	t.Run("concurrent writers", func(t *testing.T) { testStatusConcurrentWriters(t, ctx, env) })
	t.Run("record too large", func(t *testing.T) { testStatusRecordTooLarge(t, ctx, env) })
}

func testStatusSingleLocation(t *testing.T, ctx context.Context, env *statusEnv) {
	env.create(t, ctx, deploymentsGVR, reflectStatus(newDeployment("apps", "web", "east")))
	obj := env.viewGet(t, ctx, "east", deploymentsGVR, "apps", "web")
	want := map[string]interface{}{"observedGeneration": int64(1), "replicas": int64(1), "readyReplicas": int64(1), "availableReplicas": int64(1)}
	obj.Object["status"] = want
	written, err := env.views["east"].Resource(deploymentsGVR).Namespace("apps").UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("status write through east's view: %v", err)
	}
	src, err := env.src.Resource(deploymentsGVR).Namespace("apps").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := src.Object["status"]; !reflect.DeepEqual(got, want) {
		t.Errorf("the source's .status = %v, want %v", got, want)
	}
	if written.GetResourceVersion() != src.GetResourceVersion() {
		t.Errorf("the write answered resourceVersion %s, the source has %s", written.GetResourceVersion(), src.GetResourceVersion())
	}

	// A write carrying the old resourceVersion is a conflict and changes nothing.
	obj.Object["status"] = map[string]interface{}{"replicas": int64(99)}
	_, err = env.views["east"].Resource(deploymentsGVR).Namespace("apps").UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("status write with a stale resourceVersion: want 409, got %v", err)
	}
	after, _ := env.src.Resource(deploymentsGVR).Namespace("apps").Get(ctx, "web", metav1.GetOptions{})
	if after.GetResourceVersion() != src.GetResourceVersion() {
		t.Errorf("a conflicting write changed the source (resourceVersion %s → %s)", src.GetResourceVersion(), after.GetResourceVersion())
	}

	// A spec change sent through /status does not reach the source's spec.
	fresh := env.viewGet(t, ctx, "east", deploymentsGVR, "apps", "web")
	if err := unstructured.SetNestedField(fresh.Object, int64(7), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.views["east"].Resource(deploymentsGVR).Namespace("apps").UpdateStatus(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status write: %v", err)
	}
	after, _ = env.src.Resource(deploymentsGVR).Namespace("apps").Get(ctx, "web", metav1.GetOptions{})
	if r, _, _ := unstructured.NestedInt64(after.Object, "spec", "replicas"); r != 1 {
		t.Errorf("spec.replicas changed to %d through /status", r)
	}
}

func testStatusPatchTypes(t *testing.T, ctx context.Context, env *statusEnv) {
	env.create(t, ctx, deploymentsGVR, reflectStatus(newDeployment("apps", "patched", "east")))
	view := env.views["east"].Resource(deploymentsGVR).Namespace("apps")
	check := func(kind string, want int64) {
		t.Helper()
		src, err := env.src.Resource(deploymentsGVR).Namespace("apps").Get(ctx, "patched", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedInt64(src.Object, "status", "readyReplicas"); got != want {
			t.Errorf("after a %s patch the source's status.readyReplicas = %d, want %d", kind, got, want)
		}
	}
	// The source validates what is written (readyReplicas may not exceed replicas), so the
	// first patch sets replicas too.
	if _, err := view.Patch(ctx, "patched", types.MergePatchType, []byte(`{"status":{"replicas":5,"readyReplicas":1}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("merge patch of status: %v", err)
	}
	check("merge", 1)
	if _, err := view.Patch(ctx, "patched", types.JSONPatchType, []byte(`[{"op":"replace","path":"/status/readyReplicas","value":2}]`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("JSON patch of status: %v", err)
	}
	check("JSON", 2)
	if _, err := view.Patch(ctx, "patched", types.StrategicMergePatchType, []byte(`{"status":{"readyReplicas":3,"conditions":[{"type":"Available","status":"True"}]}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("strategic merge patch of status: %v", err)
	}
	check("strategic merge", 3)
	apply := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"patched","namespace":"apps"},"status":{"readyReplicas":4}}`)
	if _, err := view.Patch(ctx, "patched", types.ApplyPatchType, apply, metav1.PatchOptions{FieldManager: "e2e-mapper", Force: ptrTo(true)}, "status"); err != nil {
		t.Fatalf("server-side apply of status: %v", err)
	}
	check("apply", 4)
}

func ptrTo[T any](v T) *T { return &v }

func testStatusRefusals(t *testing.T, ctx context.Context, env *statusEnv) {
	env.create(t, ctx, deploymentsGVR, newDeployment("apps", "no-optin", "east"))
	env.create(t, ctx, deploymentsGVR, reflectStatus(newDeployment("apps", "west-only", "west")))
	patch := []byte(`{"status":{"readyReplicas":1}}`)

	_, err := env.views["east"].Resource(deploymentsGVR).Namespace("apps").Patch(ctx, "no-optin", types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), statusPolicyAnnotation) {
		t.Errorf("status write without the opt-in: want 403 naming %s, got %v", statusPolicyAnnotation, err)
	}
	_, err = env.views["east"].Resource(deploymentsGVR).Namespace("apps").Patch(ctx, "west-only", types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if !apierrors.IsNotFound(err) {
		t.Errorf("status write on an object assigned elsewhere: want 404, got %v", err)
	}
	src, _ := env.src.Resource(deploymentsGVR).Namespace("apps").Get(ctx, "west-only", metav1.GetOptions{})
	if _, found := src.Object["status"]; found && src.Object["status"] != nil && len(src.Object["status"].(map[string]interface{})) > 0 {
		t.Errorf("a refused write reached the source: %v", src.Object["status"])
	}

	// A user who may only read east's view gets 403 on a status write.
	admin := env.source.Admin().Client(t)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "east-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"mapper.kcp.io"}, Resources: []string{"locations/proxy"}, ResourceNames: []string{"east"}, Verbs: []string{"get", "watch"}}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "east-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "east-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "east-reader"}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reader, err := dynamic.NewForConfig(env.server.ViewConfig(env.source.NewUser(t, "east-reader"), "east"))
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := reader.Resource(deploymentsGVR).Namespace("apps").Get(ctx, "web", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the reader cannot read east's view: %v", err)
	}
	_, err = reader.Resource(deploymentsGVR).Namespace("apps").Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if !apierrors.IsForbidden(err) {
		t.Errorf("status write by a user with only get/watch on east's view: want 403, got %v", err)
	}
}

func testStatusSeveralLocations(t *testing.T, ctx context.Context, env *statusEnv) {
	thing := reflectStatus(newWidget(thingsGVR, "Thing", "apps", "shared", "east", "west"))
	ann := thing.GetAnnotations()
	ann[statusLocationAnnotation] = "west"
	thing.SetAnnotations(ann)
	env.create(t, ctx, thingsGVR, thing)

	statuses := map[string]map[string]interface{}{
		"east": {"phase": "Running", "location": "east"},
		"west": {"phase": "Degraded", "location": "west"},
	}
	for _, loc := range []string{"east", "west"} {
		body, _ := json.Marshal(map[string]interface{}{"status": statuses[loc]})
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			_, err := env.views[loc].Resource(thingsGVR).Namespace("apps").Patch(ctx, "shared", types.MergePatchType, body, metav1.PatchOptions{}, "status")
			return err
		})
		if err != nil {
			t.Fatalf("%s's status write: %v", loc, err)
		}
	}
	src, err := env.src.Resource(thingsGVR).Namespace("apps").Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for loc, want := range statuses {
		var got map[string]interface{}
		if err := json.Unmarshal([]byte(src.GetAnnotations()[statusRecordPrefix+loc]), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("the source's record of %s = %q, want %v", loc, src.GetAnnotations()[statusRecordPrefix+loc], want)
		}
	}
	if !reflect.DeepEqual(src.Object["status"], statuses["west"]) {
		t.Errorf("the source's .status = %v, want west's (kcp.io/status-location: west) %v", src.Object["status"], statuses["west"])
	}
	// Each view shows its own status, and no other location's record.
	for loc, want := range statuses {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			obj := env.viewGet(t, ctx, loc, thingsGVR, "apps", "shared")
			for k := range obj.GetAnnotations() {
				if strings.HasPrefix(k, statusRecordPrefix) {
					return false, fmt.Errorf("%s's view shows the record %s", loc, k)
				}
			}
			return reflect.DeepEqual(obj.Object["status"], want), nil
		})
		if err != nil {
			t.Errorf("%s's view does not show its own status: %v", loc, err)
		}
	}

	// Unassigning west removes its record from the source.
	env.update(t, ctx, thingsGVR, "apps", "shared", func(u *unstructured.Unstructured) { setAssignment(u, "east") })
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		src, err := env.src.Resource(thingsGVR).Namespace("apps").Get(ctx, "shared", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, stale := src.GetAnnotations()[statusRecordPrefix+"west"]
		return !stale, nil
	})
	if err != nil {
		t.Errorf("west's status record stayed on the source after west was unassigned: %v", err)
	}

	// Now assigned to east alone: the reconciler folds east's record into .status and removes it.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		src, err := env.src.Resource(thingsGVR).Namespace("apps").Get(ctx, "shared", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, record := src.GetAnnotations()[statusRecordPrefix+"east"]
		return !record && reflect.DeepEqual(src.Object["status"], statuses["east"]), nil
	})
	if err != nil {
		t.Errorf("east's record was not folded into .status once east was the only location: %v", err)
	}
	// mapper-controller folded it, under its leader election.
	src, err = env.src.Resource(thingsGVR).Namespace("apps").Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	folder := ""
	for _, m := range src.GetManagedFields() {
		if m.Subresource == "status" && m.Manager == "mapper-controller-status-records" {
			folder = m.Manager
		}
	}
	if folder == "" {
		t.Errorf("no status written by mapper-controller-status-records on the source; managedFields %+v", src.GetManagedFields())
	}
	if obj := env.viewGet(t, ctx, "east", thingsGVR, "apps", "shared"); !reflect.DeepEqual(obj.Object["status"], statuses["east"]) {
		t.Errorf("east's view shows .status %v, want east's %v", obj.Object["status"], statuses["east"])
	}
}

func testStatusConcurrentWriters(t *testing.T, ctx context.Context, env *statusEnv) {
	const objects, writes = 200, 5
	locOf := func(i int) string { return []string{"east", "west"}[i%2] }
	for i := 0; i < objects; i++ {
		env.create(t, ctx, thingsGVR, reflectStatus(newWidget(thingsGVR, "Thing", "apps", fmt.Sprintf("t-%03d", i), locOf(i))))
	}
	// Wait until both views hold every object.
	for _, loc := range []string{"east", "west"} {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := env.views[loc].Resource(thingsGVR).Namespace("apps").List(ctx, metav1.ListOptions{LabelSelector: locationLabelPrefix + loc})
			return err == nil && len(list.Items) >= objects/2, nil
		})
		if err != nil {
			t.Fatalf("%s's view did not fill: %v", loc, err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, objects*2)
	for i := 0; i < objects; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name, loc := fmt.Sprintf("t-%03d", i), locOf(i)
			view := env.views[loc].Resource(thingsGVR).Namespace("apps")
			for n := 1; n <= writes; n++ {
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					obj, err := view.Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					obj.Object["status"] = map[string]interface{}{"writer": name, "n": int64(n)}
					_, err = view.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("%s write %d: %w", name, n, err)
					return
				}
			}
			// The other location's view cannot write this object.
			other := env.views[locOf(i+1)].Resource(thingsGVR).Namespace("apps")
			if _, err := other.Patch(ctx, name, types.MergePatchType, []byte(`{"status":{"writer":"intruder"}}`), metav1.PatchOptions{}, "status"); !apierrors.IsNotFound(err) {
				errs <- fmt.Errorf("%s written through %s's view: %v", name, locOf(i+1), err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := env.src.Resource(thingsGVR).Namespace("apps").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, obj := range list.Items {
		if !strings.HasPrefix(obj.GetName(), "t-") {
			continue
		}
		checked++
		want := map[string]interface{}{"writer": obj.GetName(), "n": int64(writes)}
		if !reflect.DeepEqual(obj.Object["status"], want) {
			t.Errorf("%s ended with status %v, want %v", obj.GetName(), obj.Object["status"], want)
		}
	}
	if checked != objects {
		t.Errorf("checked %d objects, want %d", checked, objects)
	}
	if n := env.server.Metric(t, env.source.Admin(), "mapper_apiserver_view_status_writes_total", `code="200",resource="things.example.com"`); n < objects*writes {
		t.Errorf("mapper_apiserver_view_status_writes_total{code=200,resource=things.example.com} = %v, want at least %d", n, objects*writes)
	}
	if n := env.server.Metric(t, env.source.Admin(), "mapper_apiserver_view_status_write_duration_seconds_count", `resource="things.example.com"`); n < objects*writes {
		t.Errorf("status write latency histogram count = %v, want at least %d", n, objects*writes)
	}
}
