package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// managedSnapshot returns location → resource → namespace/name → uid of every managed target
// object, leaving out the namespaces in skip.
func (e *mapperEnv) managedSnapshot(t *testing.T, ctx context.Context, skip ...string) map[string]map[schema.GroupVersionResource]map[string]string {
	t.Helper()
	out := map[string]map[schema.GroupVersionResource]map[string]string{}
	for _, l := range mapperLocations {
		out[l] = map[schema.GroupVersionResource]map[string]string{}
		for _, gvr := range mappedGVRs {
			uids := mapperTargetUIDs(t, ctx, e.tgt[l], gvr, l)
			for k := range uids {
				for _, ns := range skip {
					if strings.HasPrefix(k, ns+"/") {
						delete(uids, k)
					}
				}
			}
			out[l][gvr] = uids
		}
	}
	return out
}

// checkKept fails the test for every object of before that is gone from its target or was
// re-created (another uid), leaving out the keys in except.
func (e *mapperEnv) checkKept(t *testing.T, ctx context.Context, what string, before map[string]map[schema.GroupVersionResource]map[string]string, except map[string]bool) {
	t.Helper()
	bad := 0
	for l, byGVR := range before {
		for gvr, uids := range byGVR {
			now := mapperTargetUIDs(t, ctx, e.tgt[l], gvr, l)
			for k, uid := range uids {
				if except[l+" "+gvr.Resource+" "+k] {
					continue
				}
				switch got, ok := now[k]; {
				case !ok:
					bad++
					t.Errorf("%s: %s %s on %s was deleted", what, gvr.Resource, k, l)
				case got != uid:
					bad++
					t.Errorf("%s: %s %s on %s was deleted and re-created", what, gvr.Resource, k, l)
				}
			}
		}
	}
	if bad > 0 {
		t.FailNow()
	}
}

// testMapperHaltedResource: a resource whose CRD the target lacks is halted there (metric, verify
// names it) while everything else keeps mapping, and is mapped once the CRD appears; an object
// that target rejects (its CRD is stricter) is retried and reported while the others map.
func testMapperHaltedResource(t *testing.T, ctx context.Context, env *mapperEnv, west []*mapperProc) {
	createCRD(t, ctx, env.src, "gadgets", "Gadget")
	createCRD(t, ctx, env.tgt["east"], "gadgets", "Gadget")
	for name, locs := range map[string][]string{"gadget-east": {"east"}, "gadget-west": {"west"}, "gadget-both": {"east", "west"}} {
		if _, err := env.src.Resource(gadgetsGVR).Namespace("team-a").Create(ctx, newWidget(gadgetsGVR, "Gadget", "team-a", name, locs...), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env.converge(t, ctx, "gadgets on a target with their CRD", "east")
	mapperEventually(t, ctx, 30*time.Second, "west halts gadgets", func() (bool, string) {
		v := mapperSumMetric(west, "mapper_resource_halted", `resource="gadgets.example.com"`)
		return v == 1, "mapper_resource_halted=" + mapperFtoa(v)
	})
	checkHalted := func(when string) {
		t.Helper()
		r := env.verifyOnce(t, "west")
		ok := r.Total == 2 && r.Count(1) == 2
		for _, v := range r.Violations {
			ok = ok && v.Resource == "gadgets.example.com" && strings.Contains(v.Message, "does not serve")
		}
		if !ok {
			t.Fatalf("%s, verify of west should report the two gadgets as halted and nothing else:\n%s", when, mapperReportText(r))
		}
	}
	checkHalted("while gadgets are halted")

	// Everything else keeps mapping meanwhile.
	key := mapperSortedKeys(env.only(t, ctx, configMapsGVR, "west", "team-a"), 1)[0]
	ns, name := mapperSplitKey(key)
	env.mutate(t, ctx, configMapsGVR, ns, name, func(u *unstructured.Unstructured) {
		u.Object["data"] = map[string]interface{}{"during": "halt"}
	})
	mapperEventually(t, ctx, 30*time.Second, "an edit reaches west while gadgets are halted", func() (bool, string) {
		obj := env.targetObject(t, ctx, "west", configMapsGVR, ns, name)
		return obj != nil && mapperMapsEqual(obj.Object["data"], map[string]interface{}{"during": "halt"}), fmt.Sprint(obj)
	})
	checkHalted("after editing a configmap")

	// West's CRD is stricter than the source's (version skew): one gadget is rejected there,
	// retried and reported, while everything else maps.
	createStrictGadgetCRD(t, ctx, env.tgt["west"])
	rejected := newWidget(gadgetsGVR, "Gadget", "team-a", "gadget-too-big", "west")
	_ = unstructured.SetNestedField(rejected.Object, int64(1000), "spec", "size")
	if _, err := env.src.Resource(gadgetsGVR).Namespace("team-a").Create(ctx, rejected, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mapperEventually(t, ctx, 60*time.Second, "everything but the rejected gadget maps on west", func() (bool, string) {
		r := env.verifyOnce(t, "west")
		ok := r.Total == 1 && r.Count(1) == 1 && r.Violations[0].Target == "team-a/gadget-too-big" && strings.Contains(r.Violations[0].Message, "would fail")
		return ok, mapperReportText(r)
	})
	if v := mapperSumMetric(west, "mapper_resource_halted", `resource="gadgets.example.com"`); v != 0 {
		t.Errorf("mapper_resource_halted is %v after the CRD appeared", v)
	}
	mapperEventually(t, ctx, 30*time.Second, "the rejection is counted", func() (bool, string) {
		v := mapperSumMetric(west, "mapper_errors_total", `resource="gadgets.example.com"`, `operation="apply"`)
		return v > 0, "mapper_errors_total=" + mapperFtoa(v)
	})
	// The rejection is in the log at the default verbosity, once per version of the object (by
	// each mapper that led meanwhile), not once per retry. The object may change version while
	// it is rejected (west's finalizer, its status record), so a mapper may log it more than
	// once, each time at another resourceVersion.
	rejections := 0
	for _, m := range west {
		versions := map[string]int{}
		for _, line := range strings.Split(m.proc.LogTail(1<<30), "\n") {
			if strings.Contains(line, "Cannot apply an object onto the target") && strings.Contains(line, "gadget-too-big") {
				rejections++
				_, rv, _ := strings.Cut(line, `resourceVersion="`)
				rv, _, _ = strings.Cut(rv, `"`)
				if versions[rv]++; versions[rv] == 2 {
					t.Errorf("a mapper of west logged the rejected gadget's failed apply at resourceVersion %q more than once, want once per version", rv)
				}
			}
		}
	}
	if rejections < 1 {
		t.Errorf("west's %d mappers never logged the rejected gadget's failed apply at the default verbosity", len(west))
	}
	env.mutate(t, ctx, gadgetsGVR, "team-a", "gadget-too-big", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(10), "spec", "size")
	})
	env.converge(t, ctx, "fixing the rejected gadget upstream", "west")
}

// createStrictGadgetCRD creates the Gadget CRD with a schema that limits spec.size to 100 and
// waits until it is served.
func createStrictGadgetCRD(t *testing.T, ctx context.Context, dyn dynamic.Interface) {
	t.Helper()
	c := crd("gadgets", "Gadget")
	versions, _, _ := unstructured.NestedSlice(c.Object, "spec", "versions")
	versions[0].(map[string]interface{})["schema"] = map[string]interface{}{"openAPIV3Schema": map[string]interface{}{
		"type": "object", "x-kubernetes-preserve-unknown-fields": true,
		"properties": map[string]interface{}{"spec": map[string]interface{}{
			"type": "object", "x-kubernetes-preserve-unknown-fields": true,
			"properties": map[string]interface{}{"size": map[string]interface{}{"type": "integer", "maximum": int64(100)}},
		}},
	}}
	_ = unstructured.SetNestedSlice(c.Object, versions, "spec", "versions")
	if _, err := dyn.Resource(crdGVR).Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mapperEventually(t, ctx, time.Minute, "the strict Gadget CRD is served", func() (bool, string) {
		_, err := dyn.Resource(gadgetsGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, mapperErrString(err)
	})
}

// testMapperViewOutage: while mapper-apiserver is down the mapper keeps the target as it is (no
// deletion, although the source deletes and unassigns objects meanwhile), and it catches up
// once the server is back.
func testMapperViewOutage(t *testing.T, ctx context.Context, env *mapperEnv, mappers []*mapperProc) {
	before := env.managedSnapshot(t, ctx)
	deleted := mapperSortedKeys(env.only(t, ctx, configMapsGVR, "east", "team-b"), 3)
	unassigned := mapperSortedKeys(env.only(t, ctx, mapperSecretsGVR, "west", "team-a"), 3)

	if err := env.server.Process.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, k := range deleted {
		ns, name := mapperSplitKey(k)
		if err := env.src.Resource(configMapsGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range unassigned {
		ns, name := mapperSplitKey(k)
		env.mutate(t, ctx, mapperSecretsGVR, ns, name, func(u *unstructured.Unstructured) { setAssignment(u) })
	}
	if _, err := env.src.Resource(configMapsGVR).Namespace("team-a").Create(ctx, decorateFixture(newConfigMap("team-a", "during-outage", "east", "west"), false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Sweeps that started after the source changes ran with the view down (and many informer
	// retries meanwhile).
	mapperWaitForSweeps(t, ctx, mappers, "with mapper-apiserver down")
	for _, m := range mappers {
		if !m.proc.Running() {
			t.Fatalf("%s exited while the view was down:\n%s", m.name, m.proc.LogTail(30))
		}
	}
	env.checkKept(t, ctx, "while mapper-apiserver is down", before, nil)

	env.server.Restart(env.owner) // owned by the test, not this subtest
	env.converge(t, ctx, "mapper-apiserver coming back", mapperLocations...)
	for _, k := range deleted {
		env.present(t, ctx, "the outage", "east", configMapsGVR, k, false)
	}
	for _, k := range unassigned {
		env.present(t, ctx, "the outage", "west", mapperSecretsGVR, k, false)
	}
	for _, l := range mapperLocations {
		env.present(t, ctx, "the outage", l, configMapsGVR, "team-a/during-outage", true)
	}
	except := map[string]bool{}
	for _, k := range deleted {
		except["east configmaps "+k] = true
	}
	for _, k := range unassigned {
		except["west secrets "+k] = true
	}
	env.checkKept(t, ctx, "after the outage", before, except)
}

// testMapperKillRestart: SIGKILL a random mapper replica at random points ten times while the
// source changes, restart it each time; the end state has no violations, and no object that
// should stay was deleted (or re-created) on the way.
func testMapperKillRestart(t *testing.T, ctx context.Context, env *mapperEnv, replicas []*mapperProc) {
	const churnNS = "churn"
	ensureNamespace(t, ctx, env.src, churnNS)
	stable := env.managedSnapshot(t, ctx, churnNS)

	// Churn in its own namespace: creates, re-assignments, edits and deletes.
	churnCtx, stopChurn := context.WithCancel(ctx)
	var wg sync.WaitGroup
	ops := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewSource(10))
		for churnCtx.Err() == nil {
			name := fmt.Sprintf("churn-%02d", r.Intn(30))
			client := env.src.Resource(configMapsGVR).Namespace(churnNS)
			switch r.Intn(4) {
			case 0:
				_, _ = client.Create(churnCtx, decorateFixture(newConfigMap(churnNS, name, randomLocations(r, mapperLocations)...), false), metav1.CreateOptions{})
			case 1:
				if obj, err := client.Get(churnCtx, name, metav1.GetOptions{}); err == nil {
					setAssignment(obj, randomLocations(r, mapperLocations)...)
					_, _ = client.Update(churnCtx, obj, metav1.UpdateOptions{})
				}
			case 2:
				if obj, err := client.Get(churnCtx, name, metav1.GetOptions{}); err == nil {
					obj.Object["data"] = map[string]interface{}{"n": fmt.Sprint(r.Int())}
					_, _ = client.Update(churnCtx, obj, metav1.UpdateOptions{})
				}
			case 3:
				_ = client.Delete(churnCtx, name, metav1.DeleteOptions{})
			}
			ops++
			time.Sleep(50 * time.Millisecond)
		}
	}()

	r := rand.New(rand.NewSource(42))
	for i := 0; i < 10; i++ {
		m := replicas[r.Intn(len(replicas))]
		time.Sleep(time.Duration(200+r.Intn(3000)) * time.Millisecond)
		if err := syscall.Kill(-m.proc.PID, syscall.SIGKILL); err != nil {
			t.Fatalf("killing %s: %v", m.name, err)
		}
		<-m.proc.Exited()
		time.Sleep(time.Duration(r.Intn(1000)) * time.Millisecond)
		m.restart()
		t.Logf("kill %d: SIGKILLed and restarted %s", i+1, m.name)
	}
	stopChurn()
	wg.Wait()
	t.Logf("%d source operations ran during the kills", ops)
	env.converge(t, ctx, "ten SIGKILLs", mapperLocations...)
	env.checkKept(t, ctx, "after ten SIGKILLs", stable, nil)
}
