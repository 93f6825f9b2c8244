package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
)

// TestDeletionCrashPoints kills the mapper with SIGKILL (the test-only hook
// mapper.CrashPointEnv) at the two dangerous points of the deletion protocol: between adding
// the location's finalizer and creating the copy, and between deleting the copy and removing
// the finalizer. Each time a clean mapper started afterwards converges (the source object is
// released and goes), and an object re-created under the same name gets a copy of its own that
// no later sweep deletes for the old object's UID.
func TestDeletionCrashPoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startMapperEnv(t, ctx, "east")
	ensureNamespace(t, ctx, env.src, deletionNamespace)
	src := env.src.Resource(configMapsGVR).Namespace(deletionNamespace)
	// crashing starts a mapper that kills itself at point and waits until it did.
	crashing := func(name, point string, trigger func()) {
		t.Helper()
		m := env.startMapper(t, name, "east", []string{mapper.CrashPointEnv + "=" + point})
		trigger()
		select {
		case <-m.proc.Exited():
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s did not reach the crash point %s", name, point)
		}
		t.Logf("%s killed itself at %s", name, point)
	}
	// recreate creates name again once the old object is gone, and checks that its copy is its
	// own and survives two orphan sweeps of clean.
	recreate := func(name string, clean *mapperProc) {
		t.Helper()
		await(t, ctx, time.Minute, "the old "+name+" to be gone at the source", func(ctx context.Context) (bool, error) {
			return env.sourceObject(t, ctx, configMapsGVR, deletionNamespace, name) == nil, nil
		})
		created, err := src.Create(ctx, newConfigMap(deletionNamespace, name, "east"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		await(t, ctx, time.Minute, "the copy of the re-created "+name, func(ctx context.Context) (bool, error) {
			u := env.targetObject(t, ctx, "east", configMapsGVR, deletionNamespace, name)
			return u != nil && u.GetAnnotations()[contract.SourceUIDAnnotation] == string(created.GetUID()), nil
		})
		mapperWaitForSweeps(t, ctx, []*mapperProc{clean}, "after "+name+" was re-created")
		u := env.targetObject(t, ctx, "east", configMapsGVR, deletionNamespace, name)
		if u == nil || u.GetAnnotations()[contract.SourceUIDAnnotation] != string(created.GetUID()) {
			t.Fatalf("the re-created %s lost its copy: %v", name, u)
		}
		env.converge(t, ctx, "re-created "+name, "east")
	}

	t.Run("killed between adding the finalizer and creating the copy", func(t *testing.T) {
		crashing("mapper-east-crash-1", mapper.CrashAfterFinalizerAdded, func() {
			if _, err := src.Create(ctx, newConfigMap(deletionNamespace, "a", "east"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		})
		env.awaitFinalizers(t, ctx, configMapsGVR, "a", "east")
		if env.targetObject(t, ctx, "east", configMapsGVR, deletionNamespace, "a") != nil {
			t.Fatal("a copy exists although the mapper was killed before creating it")
		}
		// Deleted at the source while no mapper runs: it waits for east.
		env.deleteSource(t, ctx, configMapsGVR, "a")
		if u := env.awaitFinalizers(t, ctx, configMapsGVR, "a", "east"); u.GetDeletionTimestamp() == nil {
			t.Fatal("a is not Terminating")
		}
		clean := env.startMapper(t, "mapper-east-clean-1", "east", nil)
		recreate("a", clean)
		if err := clean.proc.Stop(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("killed between deleting the copy and removing the finalizer", func(t *testing.T) {
		crashing("mapper-east-crash-2", mapper.CrashAfterCopyDeleted, func() {
			if _, err := src.Create(ctx, newConfigMap(deletionNamespace, "b", "east"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			env.awaitCopy(t, ctx, "east", configMapsGVR, "b", true)
			env.deleteSource(t, ctx, configMapsGVR, "b")
		})
		env.awaitCopy(t, ctx, "east", configMapsGVR, "b", false)
		if u := env.awaitFinalizers(t, ctx, configMapsGVR, "b", "east"); u.GetDeletionTimestamp() == nil {
			t.Fatal("b is not Terminating")
		}
		clean := env.startMapper(t, "mapper-east-clean-2", "east", nil)
		recreate("b", clean)
	})
}
