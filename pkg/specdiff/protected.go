package specdiff

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ChangedProtected returns the first of the paths a per-location patch may not change
// (apiVersion, kind, metadata.name/namespace/uid/resourceVersion/generation, status) whose value
// differs between before and after, as a JSON pointer, and whether there is one. Customizations
// (pkg/customization) are held to the same rule after they ran, since their CEL-computed patches
// cannot be checked before.
func ChangedProtected(before, after *unstructured.Unstructured) (string, bool) {
	for _, p := range protectedPaths {
		fields := strings.Split(strings.TrimPrefix(p, "/"), "/")
		b, bok, _ := unstructured.NestedFieldNoCopy(before.Object, fields...)
		a, aok, _ := unstructured.NestedFieldNoCopy(after.Object, fields...)
		if bok != aok || !equality.Semantic.DeepEqual(b, a) {
			return p, true
		}
	}
	return "", false
}
