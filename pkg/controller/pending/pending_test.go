package pending

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWrites(t *testing.T) {
	w := New()
	v1 := &metav1.ObjectMeta{UID: "u", ResourceVersion: "1"}
	if w.Stale(v1) {
		t.Fatal("an object never written is stale")
	}
	w.Wrote(v1, "1")
	if w.Stale(v1) || w.Len() != 0 {
		t.Fatal("a write that changed nothing was recorded")
	}
	w.Wrote(v1, "2")
	if !w.Stale(v1) || !w.Stale(v1) {
		t.Fatal("the version the write was made from is not stale")
	}
	if w.Stale(&metav1.ObjectMeta{UID: "u", ResourceVersion: "2"}) || w.Len() != 0 {
		t.Fatal("the written version is stale, or the write is remembered after it was seen")
	}
	if w.Stale(v1) {
		t.Fatal("an old version is stale once the write was seen")
	}
	w.Wrote(v1, "3")
	w.Forget("u")
	if w.Len() != 0 {
		t.Fatal("Forget kept the write")
	}
}
