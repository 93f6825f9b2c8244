package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// testStatusRecordTooLarge: a status write whose record would exceed 32 KiB is refused with 413
// before anything is written to the source, and the other location keeps writing
// (docs/design.md, "Status records").
func testStatusRecordTooLarge(t *testing.T, ctx context.Context, env *statusEnv) {
	env.create(t, ctx, thingsGVR, reflectStatus(newWidget(thingsGVR, "Thing", "apps", "big", "east", "west")))
	huge, _ := json.Marshal(map[string]interface{}{"status": map[string]interface{}{"blob": strings.Repeat("x", 40*1024)}})
	_, err := env.views["east"].Resource(thingsGVR).Namespace("apps").Patch(ctx, "big", types.MergePatchType, huge, metav1.PatchOptions{}, "status")
	if !apierrors.IsRequestEntityTooLargeError(err) || !strings.Contains(err.Error(), "32768") {
		t.Fatalf("a 40 KiB status record: want 413 naming the 32768-byte limit, got %v", err)
	}
	src, err := env.src.Resource(thingsGVR).Namespace("apps").Get(ctx, "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found := src.GetAnnotations()[statusRecordPrefix+"east"]; found {
		t.Errorf("the refused record reached the source")
	}
	small := []byte(`{"status":{"phase":"Running"}}`)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := env.views["west"].Resource(thingsGVR).Namespace("apps").Patch(ctx, "big", types.MergePatchType, small, metav1.PatchOptions{}, "status")
		return err
	})
	if err != nil {
		t.Errorf("west's small status write after east's refused one: %v", err)
	}
}
