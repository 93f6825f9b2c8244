package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestRestartNeverAnswersAsAnonymous: while mapper-apiserver restarts three times, clients keep
// reading an object of a view, through the aggregator (the front-proxy's client certificate and
// X-Remote-User) and straight (a client certificate). Until its delegated authentication is
// ready (the client CA and the front-proxy CA of kube-system/extension-apiserver-authentication
// served) and it has read the source's discovery, and again once its cache stopped as it shuts
// down, the server answers 503 with a Retry-After:
// never 401 or 403 as system:anonymous, nor 404 for the object, which exists all along (a
// mapper takes a 404 for "gone" and may delete its copy); then 200. Fails before the
// authentication gate and the discovery check of views: requests right after a start were
// answered 403 for system:anonymous (16 of them through the aggregator, 34 straight, and 15
// straight ones 401), and 404 (520 and 820) until the cache had read the source's discovery;
// with those fixed, 3 straight ones still were 404 while the old process shut down.
func TestRestartNeverAnswersAsAnonymous(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	src := dynamicClientFor(t, source)
	ensureNamespace(t, ctx, src, "apps")
	if _, err := src.Resource(configMapsGVR).Namespace("apps").Create(ctx, newConfigMap("apps", "a", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	api := framework.StartAggregatedMapperAPIServer(t, source, "--resources=configmaps")
	clients := map[string]dynamic.Interface{}
	aggCfg := api.ViewConfig(source.Admin(), "east")
	aggCfg.QPS = -1
	directCfg := api.Server.ViewConfig(source.Admin(), "east")
	var err error
	if clients["aggregator"], err = dynamic.NewForConfig(aggCfg); err != nil {
		t.Fatal(err)
	}
	if clients["straight"], err = dynamic.NewForConfig(directCfg); err != nil {
		t.Fatal(err)
	}

	type tally struct {
		mu      sync.Mutex
		answers map[string]int
		bad     []string
	}
	results := map[string]*tally{}
	readCtx, stopReading := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for name, c := range clients {
		tl := &tally{answers: map[string]int{}}
		results[name] = tl
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for readCtx.Err() == nil {
					_, err := c.Resource(configMapsGVR).Namespace("apps").Get(readCtx, "a", metav1.GetOptions{})
					if readCtx.Err() != nil {
						return
					}
					answer := "200"
					if err != nil {
						answer = fmt.Sprint(code(err))
						if code(err) == 0 {
							answer = "no connection"
						}
					}
					tl.mu.Lock()
					tl.answers[answer]++
					if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) || strings.Contains(fmt.Sprint(err), "system:anonymous") {
						if len(tl.bad) < 5 {
							tl.bad = append(tl.bad, err.Error())
						}
					}
					tl.mu.Unlock()
				}
			}()
		}
	}
	for i := 0; i < 3; i++ {
		api.Server.StopAndStart(t)
		if err := api.Server.WaitReady(); err != nil {
			t.Fatal(err)
		}
	}
	stopReading()
	wg.Wait()
	for name, tl := range results {
		var answers []string
		for a, n := range tl.answers {
			answers = append(answers, fmt.Sprintf("%s: %d", a, n))
		}
		sort.Strings(answers)
		t.Logf("%s: %s", name, strings.Join(answers, ", "))
		if len(tl.bad) > 0 {
			t.Errorf("%s: answered as an unauthenticated user during a restart: %s", name, strings.Join(tl.bad, "; "))
		}
	}
}
