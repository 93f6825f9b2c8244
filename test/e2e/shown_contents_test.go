package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// shownContents records the content of every object a view showed, by location, object and
// resourceVersion, and the pairs shown with two contents: a client of a view (any informer,
// the mapper) takes one resourceVersion for one content (docs/views.md, "Restarts and
// replicas"). DELETED events are not recorded: for a label-selector watch kube-apiserver
// itself sends the object's last state with the deletion's resourceVersion.
type shownContents struct {
	mu        sync.Mutex
	m         map[string]*unstructured.Unstructured
	conflicts []string
}

func newShownContents() *shownContents {
	return &shownContents{m: map[string]*unstructured.Unstructured{}}
}

// note records u as location's view showed it.
func (s *shownContents) note(location string, u *unstructured.Unstructured) {
	k := fmt.Sprintf("%s %s|%s/%s@%s", location, u.GetAnnotations()[contract.ClusterAnnotation], u.GetNamespace(), u.GetName(), u.GetResourceVersion())
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.m[k]; ok && !equality.Semantic.DeepEqual(prev.Object, u.Object) {
		s.conflicts = append(s.conflicts, fmt.Sprintf("%s:\n  first %v\n  then  %v", k, prev.Object, u.Object))
		return
	}
	s.m[k] = u.DeepCopy()
}

// noteList records every item of list.
func (s *shownContents) noteList(location string, list *unstructured.UnstructuredList) {
	for i := range list.Items {
		s.note(location, &list.Items[i])
	}
}

// check fails the test for every (location, object, resourceVersion) shown with two contents.
func (s *shownContents) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	sort.Strings(s.conflicts)
	if len(s.conflicts) > 0 {
		t.Fatalf("%d resourceVersions shown with two contents:\n%s", len(s.conflicts), strings.Join(s.conflicts, "\n"))
	}
	t.Logf("%d (location, object, resourceVersion) shown, each with one content", len(s.m))
}

// follow lists and watches client (a resource of location's view) until ctx ends, as an
// informer does: a watch that ends is resumed from the last resourceVersion seen, and a 410
// (or any other error) relists. Every object listed and every ADDED and MODIFIED event is
// recorded.
func (s *shownContents) follow(ctx context.Context, location string, client dynamic.ResourceInterface) {
	var rv string
	for ctx.Err() == nil {
		if rv == "" {
			list, err := client.List(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(200 * time.Millisecond) // the server is restarting: retry, as a reflector backs off
				continue
			}
			s.noteList(location, list)
			rv = list.GetResourceVersion()
		}
		w, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = ""
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for e := range w.ResultChan() {
			if e.Type == watch.Error {
				rv = "" // 410 in the stream: relist
				break
			}
			u, ok := e.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if e.Type == watch.Added || e.Type == watch.Modified {
				s.note(location, u)
			}
			rv = u.GetResourceVersion()
		}
		w.Stop()
	}
}
