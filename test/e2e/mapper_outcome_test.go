package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	mapperv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/heartbeat"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// outcomeNamespace holds the objects of TestMapperOutcomeRecordsAndPause.
const outcomeNamespace = "outcomes"

// TestMapperOutcomeRecordsAndPause runs one mapper of east, registered with a SyncTarget, on a
// target whose Gadget CRD is stricter than the source's (docs/mapper.md, "Outcome records" and
// "Pausing"):
//   - each new object is applied once: the change its first sync makes of it through the view
//     (east's finalizer) sends nothing more to the target;
//   - a gadget the target rejects gets east's outcome record Rejected with the target's
//     admission message, written once however often the apply is retried; east's view shows
//     it, another location's view does not; through its view east may write no other
//     location's record (405), no record without a reason (400), none over 4 KiB (413);
//     fixed at the source, it is mapped and loses it;
//   - a ConfigMap whose place a hand-made target object holds gets the outcome Conflict, and
//     loses it once the hand-made object is gone and the copy is made;
//   - spec.paused: true stops every write and delete on the target (counted by the target
//     kube-apiserver's apiserver_request_total and the mapper's counters) while the mapper keeps
//     renewing its Lease; the objects changed meanwhile carry the outcome Paused; `kubectl get
//     locations` shows it (the Location's status.paused); once unpaused everything converges and no record is left;
//   - spec.haltedResources holds gadgets only (outcome ResourceHalted) while ConfigMaps map;
//   - the record of an object that left east without east's finalizer (it was in conflict)
//     is removed by mapper-controller's status record controller.
func TestMapperOutcomeRecordsAndPause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	env := startMapperEnv(t, ctx, "east")
	env.verifyArgs = []string{"--namespace-mapping=same"}
	framework.InstallControlCRDs(t, ctx, env.source)
	framework.EnsureNamespace(t, ctx, env.source, heartbeat.DefaultLeaseNamespace)
	framework.EnsureNamespace(t, ctx, env.source, outcomeNamespace)
	framework.EnsureNamespace(t, ctx, env.targets["east"], outcomeNamespace)
	if _, err := env.src.Resource(synctarget.Resource).Create(ctx, newSyncTarget("east", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createCRD(t, ctx, env.src, "gadgets", "Gadget")
	createStrictGadgetCRD(t, ctx, env.tgt["east"])
	cms := env.src.Resource(configMapsGVR).Namespace(outcomeNamespace)
	gadgets := env.src.Resource(gadgetsGVR).Namespace(outcomeNamespace)
	for _, name := range []string{"kept", "doomed", "leaving"} {
		if _, err := cms.Create(ctx, newConfigMap(outcomeNamespace, name, "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	m := env.startMapper(t, "east-0", "east", nil, "--namespace-mapping=same", "--source-kubeconfig="+env.source.AdminKubeconfig(),
		"--lease-renew-interval=1s", "--lease-duration=5s")
	mappers := []*mapperProc{m}
	env.converge(t, ctx, "the first ConfigMaps", "east")

	t.Run("one apply per new object", func(t *testing.T) {
		// Each of the three ConfigMaps was applied once, then its view object changed: east's
		// finalizer, added through the view before the copy was made. That sync sends nothing
		// (the copy is as the apply left it) and counts the apply unchanged.
		configMaps := `resource="configmaps"`
		mapperEventually(t, ctx, time.Minute, "the finalizer's change of each ConfigMap reached the mapper", func() (bool, string) {
			v := mapperSumMetric(mappers, "mapper_applies_total", configMaps, `result="unchanged"`)
			return v >= 3, "unchanged applies: " + mapperFtoa(v)
		})
		if v := mapperSumMetric(mappers, "mapper_applies_total", configMaps, `result="success"`); v != 3 {
			t.Errorf("%v applies of the three new ConfigMaps reached the target, want one each", v)
		}
	})

	t.Run("Rejected", func(t *testing.T) {
		tooBig := newWidget(gadgetsGVR, "Gadget", outcomeNamespace, "too-big", "east", "west")
		_ = unstructured.SetNestedField(tooBig.Object, int64(1000), "spec", "size")
		if _, err := gadgets.Create(ctx, tooBig, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rec := waitOutcome(t, ctx, env.src, gadgetsGVR, "too-big", "east", func(r *contract.OutcomeRecord) bool {
			return r != nil && r.Reason == contract.OutcomeRejected
		})
		if !strings.Contains(rec.Message, "spec.size") || !strings.Contains(rec.Message, "100") || rec.Time == "" {
			t.Errorf("the record does not carry the target's admission message: %+v", rec)
		}
		// Retried with backoff, the apply fails again; the record says the same, so it is not
		// written again.
		before := mapperSumMetric(mappers, "mapper_applies_total", `resource="gadgets.example.com"`, `result="error"`)
		mapperEventually(t, ctx, time.Minute, "the rejected gadget is retried three more times", func() (bool, string) {
			v := mapperSumMetric(mappers, "mapper_applies_total", `resource="gadgets.example.com"`, `result="error"`)
			return v >= before+3, "failed applies: " + mapperFtoa(v)
		})
		if v := mapperSumMetric(mappers, "mapper_outcome_writes_total", `resource="gadgets.example.com"`, `operation="set"`, `result="success"`); v != 1 {
			t.Errorf("the outcome record was written %v times, want once (only when it changes)", v)
		}
		// East's view shows east's record; west's view shows no record at all.
		east := viewOf(t, env, "east").Resource(gadgetsGVR).Namespace(outcomeNamespace)
		west := viewOf(t, env, "west").Resource(gadgetsGVR).Namespace(outcomeNamespace)
		if u, err := east.Get(ctx, "too-big", metav1.GetOptions{}); err != nil || u.GetAnnotations()[contract.OutcomeAnnotation("east")] == "" {
			t.Errorf("east's view does not show east's outcome record: %v", err)
		}
		if u, err := west.Get(ctx, "too-big", metav1.GetOptions{}); err != nil {
			t.Errorf("reading the gadget through west's view: %v", err)
		} else {
			for k := range u.GetAnnotations() {
				if strings.HasPrefix(k, contract.OutcomeAnnotationPrefix) {
					t.Errorf("west's view shows %s", k)
				}
			}
		}

		// Through its view a location writes its own record and nothing else: another
		// location's record is 405, a record that is not one 400, one over 4 KiB 413.
		for _, c := range []struct {
			key, value string
			code       int32
		}{
			{contract.OutcomeAnnotation("west"), `{"reason":"Paused"}`, http.StatusMethodNotAllowed},
			{contract.OutcomeAnnotation("east"), `{"message":"no reason"}`, http.StatusBadRequest},
			{contract.OutcomeAnnotation("east"), `{"reason":"Rejected","message":"` + strings.Repeat("x", contract.MaxOutcomeRecordBytes) + `"}`, http.StatusRequestEntityTooLarge},
		} {
			u, err := east.Get(ctx, "too-big", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ann := u.GetAnnotations()
			ann[c.key] = c.value
			u.SetAnnotations(ann)
			_, err = east.Update(ctx, u, metav1.UpdateOptions{})
			var status apierrors.APIStatus
			if !errors.As(err, &status) || status.Status().Code != c.code {
				t.Errorf("writing %s = %.40s through east's view: %v, want %d", c.key, c.value, err, c.code)
			}
		}

		env.mutate(t, ctx, gadgetsGVR, outcomeNamespace, "too-big", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(10), "spec", "size")
		})
		waitOutcome(t, ctx, env.src, gadgetsGVR, "too-big", "east", func(r *contract.OutcomeRecord) bool { return r == nil })
		if env.targetObject(t, ctx, "east", gadgetsGVR, outcomeNamespace, "too-big") == nil {
			t.Error("the record was removed before the gadget was mapped")
		}
	})

	t.Run("Conflict", func(t *testing.T) {
		handMade := newConfigMap(outcomeNamespace, "taken")
		if _, err := env.tgt["east"].Resource(configMapsGVR).Namespace(outcomeNamespace).Create(ctx, handMade, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Create(ctx, newConfigMap(outcomeNamespace, "taken", "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rec := waitOutcome(t, ctx, env.src, configMapsGVR, "taken", "east", func(r *contract.OutcomeRecord) bool {
			return r != nil && r.Reason == contract.OutcomeConflict
		})
		if !strings.Contains(rec.Message, "without the mapper's label") {
			t.Errorf("the Conflict record does not say what is in the way: %+v", rec)
		}
		if err := env.tgt["east"].Resource(configMapsGVR).Namespace(outcomeNamespace).Delete(ctx, "taken", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitOutcome(t, ctx, env.src, configMapsGVR, "taken", "east", func(r *contract.OutcomeRecord) bool { return r == nil })
		env.converge(t, ctx, "the hand-made object gone", "east")
	})

	t.Run("Paused", func(t *testing.T) {
		setSyncTargetSpec(t, ctx, env.src, "east", `{"spec":{"paused":true}}`)
		mapperEventually(t, ctx, 30*time.Second, "the mapper learns that east is paused", func() (bool, string) {
			v := mapperSumMetric(mappers, "mapper_paused", `resource=""`)
			return v == 1, "mapper_paused=" + mapperFtoa(v)
		})
		writes := func() (float64, float64) {
			target := targetWrites(t, ctx, env.targets["east"], "configmaps", "gadgets", "namespaces")
			own := m.metricTotal("mapper_applies_total") + m.metricTotal("mapper_deletes_total")
			return target, own
		}
		targetBefore, ownBefore := writes()
		if targetBefore == 0 || ownBefore == 0 {
			t.Fatalf("the counters saw no write before the pause (target %v, mapper %v): they cannot show one during it", targetBefore, ownBefore)
		}
		renewedBefore := leaseRenewTime(t, ctx, env.source, "east")

		// Changes at the source: an edit, a new object, a deletion, an unassignment.
		env.mutate(t, ctx, configMapsGVR, outcomeNamespace, "kept", func(u *unstructured.Unstructured) {
			u.Object["data"] = map[string]interface{}{"key": "during-pause"}
		})
		if _, err := cms.Create(ctx, newConfigMap(outcomeNamespace, "new", "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		env.mutate(t, ctx, configMapsGVR, outcomeNamespace, "leaving", func(u *unstructured.Unstructured) { setAssignment(u) })
		for _, name := range []string{"kept", "new", "doomed", "leaving"} {
			waitOutcome(t, ctx, env.src, configMapsGVR, name, "east", func(r *contract.OutcomeRecord) bool {
				return r != nil && r.Reason == contract.OutcomePaused
			})
		}
		// The mapper keeps working meanwhile: two more sweeps skipped, its Lease renewed.
		skipped := mapperSumMetric(mappers, "mapper_orphan_sweeps_total", `result="skipped"`)
		mapperEventually(t, ctx, 30*time.Second, "two orphan sweeps skipped while paused", func() (bool, string) {
			v := mapperSumMetric(mappers, "mapper_orphan_sweeps_total", `result="skipped"`)
			return v >= skipped+2, "skipped sweeps: " + mapperFtoa(v)
		})
		mapperEventually(t, ctx, 30*time.Second, "the Lease is renewed while paused", func() (bool, string) {
			r := leaseRenewTime(t, ctx, env.source, "east")
			return r.After(renewedBefore), "renewTime " + r.String()
		})
		targetPaused, ownPaused := writes()
		if targetPaused != targetBefore || ownPaused != ownBefore {
			t.Errorf("while paused: %v writes reached the target (apiserver_request_total) and the mapper counted %v applies and deletes, want none",
				targetPaused-targetBefore, ownPaused-ownBefore)
		}
		if u := env.targetObject(t, ctx, "east", configMapsGVR, outcomeNamespace, "doomed"); u == nil {
			t.Error("the copy of a ConfigMap deleted at the source was deleted while paused")
		}
		if u := env.targetObject(t, ctx, "east", configMapsGVR, outcomeNamespace, "leaving"); u == nil {
			t.Error("the copy of an unassigned ConfigMap was deleted while paused")
		}
		if u := env.targetObject(t, ctx, "east", configMapsGVR, outcomeNamespace, "new"); u != nil {
			t.Error("a ConfigMap created while paused was copied")
		}
		server := serverClient(t, env)
		mapperEventually(t, ctx, 90*time.Second, "the Location east says it is paused", func() (bool, string) {
			raw, err := server.Get().AbsPath("/apis/mapper.kcp.io/v1alpha1/locations/east").DoRaw(ctx)
			var l mapperv1alpha1.Location
			if err == nil {
				err = json.Unmarshal(raw, &l)
			}
			return err == nil && l.Status.Paused, fmt.Sprintf("%v %s", err, raw)
		})

		setSyncTargetSpec(t, ctx, env.src, "east", `{"spec":{"paused":false}}`)
		env.converge(t, ctx, "unpausing", "east")
		if target, _ := writes(); target <= targetPaused {
			t.Errorf("the target counted no write after unpausing (%v): the count during the pause proves nothing", target)
		} else {
			t.Logf("target writes: %v before the pause, %v during it, %v after unpausing", targetBefore, targetPaused, target)
		}
		for _, name := range []string{"kept", "new"} {
			waitOutcome(t, ctx, env.src, configMapsGVR, name, "east", func(r *contract.OutcomeRecord) bool { return r == nil })
		}
		for _, name := range []string{"doomed", "leaving"} {
			mapperEventually(t, ctx, 30*time.Second, name+" is released by east", func() (bool, string) {
				u, err := cms.Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return true, ""
				}
				if err != nil {
					return false, err.Error()
				}
				_, hasRecord := u.GetAnnotations()[contract.OutcomeAnnotation("east")]
				return !hasRecord && len(u.GetFinalizers()) == 0, fmt.Sprintf("finalizers %v, annotations %v", u.GetFinalizers(), u.GetAnnotations())
			})
		}
	})

	t.Run("HaltedResources", func(t *testing.T) {
		setSyncTargetSpec(t, ctx, env.src, "east", `{"spec":{"haltedResources":["gadgets.example.com"]}}`)
		mapperEventually(t, ctx, 30*time.Second, "the mapper learns that gadgets are halted", func() (bool, string) {
			v := mapperSumMetric(mappers, "mapper_paused", `resource="gadgets.example.com"`)
			return v == 1, "mapper_paused=" + mapperFtoa(v)
		})
		env.mutate(t, ctx, gadgetsGVR, outcomeNamespace, "too-big", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(20), "spec", "size")
		})
		env.mutate(t, ctx, configMapsGVR, outcomeNamespace, "kept", func(u *unstructured.Unstructured) {
			u.Object["data"] = map[string]interface{}{"key": "during-halt"}
		})
		waitOutcome(t, ctx, env.src, gadgetsGVR, "too-big", "east", func(r *contract.OutcomeRecord) bool {
			return r != nil && r.Reason == contract.OutcomeResourceHalted
		})
		mapperEventually(t, ctx, 30*time.Second, "ConfigMaps map while gadgets are halted", func() (bool, string) {
			u := env.targetObject(t, ctx, "east", configMapsGVR, outcomeNamespace, "kept")
			return u != nil && mapperMapsEqual(u.Object["data"], map[string]interface{}{"key": "during-halt"}), fmt.Sprint(u)
		})
		if u := env.targetObject(t, ctx, "east", gadgetsGVR, outcomeNamespace, "too-big"); u == nil {
			t.Fatal("the halted gadget's copy is gone")
		} else if size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size"); size != 10 {
			t.Errorf("the halted gadget's copy has size %d, want 10 (not changed while halted)", size)
		}
		setSyncTargetSpec(t, ctx, env.src, "east", `{"spec":{"haltedResources":null}}`)
		env.converge(t, ctx, "lifting the halt", "east")
		waitOutcome(t, ctx, env.src, gadgetsGVR, "too-big", "east", func(r *contract.OutcomeRecord) bool { return r == nil })
	})

	t.Run("LeftTheLocation", func(t *testing.T) {
		// An object in conflict never got east's finalizer (it is added before the first copy):
		// once unassigned it leaves east's view at once, and mapper-controller's status record
		// controller removes east's record.
		framework.StartMapperController(t, ctx, env.source, time.Minute, append(framework.MapperAPIServerArgs(t, env.server), "--controllers=statusrecords")...)
		if _, err := env.tgt["east"].Resource(configMapsGVR).Namespace(outcomeNamespace).Create(ctx, newConfigMap(outcomeNamespace, "blocked"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Create(ctx, newConfigMap(outcomeNamespace, "blocked", "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitOutcome(t, ctx, env.src, configMapsGVR, "blocked", "east", func(r *contract.OutcomeRecord) bool {
			return r != nil && r.Reason == contract.OutcomeConflict
		})
		env.mutate(t, ctx, configMapsGVR, outcomeNamespace, "blocked", func(u *unstructured.Unstructured) {
			if len(u.GetFinalizers()) > 0 {
				t.Errorf("an object in conflict carries finalizers %v", u.GetFinalizers())
			}
			setAssignment(u)
		})
		waitOutcome(t, ctx, env.src, configMapsGVR, "blocked", "east", func(r *contract.OutcomeRecord) bool { return r == nil })
		if u := env.targetObject(t, ctx, "east", configMapsGVR, outcomeNamespace, "blocked"); u == nil {
			t.Error("the hand-made object in the way was deleted")
		}
	})
}

// waitOutcome polls location's outcome record on the source object ns/name of gvr in
// outcomeNamespace until cond holds (nil: no record), and returns it.
func waitOutcome(t *testing.T, ctx context.Context, src dynamic.Interface, gvr schema.GroupVersionResource, name, location string, cond func(*contract.OutcomeRecord) bool) *contract.OutcomeRecord {
	t.Helper()
	var got *contract.OutcomeRecord
	mapperEventually(t, ctx, 60*time.Second, fmt.Sprintf("the outcome record of %s on %s %s", location, gvr.Resource, name), func() (bool, string) {
		u, err := src.Resource(gvr).Namespace(outcomeNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = nil
		v, ok := u.GetAnnotations()[contract.OutcomeAnnotation(location)]
		if ok {
			r, err := contract.ParseOutcomeRecord(v)
			if err != nil {
				return false, fmt.Sprintf("a record that does not parse (%v): %s", err, v)
			}
			got = &r
		}
		return cond(got), fmt.Sprintf("record %q", v)
	})
	return got
}

// setSyncTargetSpec merge-patches the SyncTarget name with patch.
func setSyncTargetSpec(t *testing.T, ctx context.Context, src dynamic.Interface, name, patch string) {
	t.Helper()
	if _, err := src.Resource(synctarget.Resource).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching SyncTarget %s with %s: %v", name, patch, err)
	}
}

// serverClient returns an admin REST client of env's mapper-apiserver itself.
func serverClient(t *testing.T, env *mapperEnv) *rest.RESTClient {
	t.Helper()
	cfg := env.source.AdminConfig()
	cfg.Host = env.server.URL
	cfg.TLSClientConfig.CAData = env.server.ServingCA.CertPEM
	cfg.TLSClientConfig.CAFile = ""
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	c, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// viewOf returns an admin dynamic client of location's view on env's mapper-apiserver.
func viewOf(t *testing.T, env *mapperEnv, location string) dynamic.Interface {
	t.Helper()
	cfg := env.source.AdminConfig()
	cfg.Host = env.server.ViewURL(location)
	cfg.TLSClientConfig.CAData = env.server.ServingCA.CertPEM
	cfg.TLSClientConfig.CAFile = ""
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// targetWrites returns the sum of kube-apiserver's apiserver_request_total over the verbs that
// change state (POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION) on resources, read from
// cp's /metrics.
func targetWrites(t *testing.T, ctx context.Context, cp *framework.ControlPlane, resources ...string) float64 {
	t.Helper()
	var verbs []string
	for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"} {
		verbs = append(verbs, `verb="`+verb+`"`)
	}
	var of []string
	for _, r := range resources {
		of = append(of, `resource="`+r+`"`)
	}
	return controlPlaneMetric(t, ctx, cp, "apiserver_request_total", verbs, of)
}

// controlPlaneMetric returns the sum of the samples of metric on cp's /metrics (kube-apiserver)
// whose labels contain, for each group of anyOf, at least one of its `k="v"` strings.
func controlPlaneMetric(t *testing.T, ctx context.Context, cp *framework.ControlPlane, metric string, anyOf ...[]string) float64 {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the metrics of kube-apiserver: %v", err)
	}
	total := 0.0
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		all := true
		for _, group := range anyOf {
			one := false
			for _, label := range group {
				one = one || strings.Contains(line, label)
			}
			all = all && one
		}
		if !all {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			t.Fatalf("a sample that does not parse: %s", line)
		}
		total += v
	}
	return total
}

// leaseRenewTime returns the renewTime of location's Lease in the source.
func leaseRenewTime(t *testing.T, ctx context.Context, source *framework.ControlPlane, location string) time.Time {
	t.Helper()
	l, err := source.Admin().Client(t).CoordinationV1().Leases(heartbeat.DefaultLeaseNamespace).Get(ctx, location, metav1.GetOptions{})
	if err != nil || l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}
