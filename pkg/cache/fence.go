package cache

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// fencePollInterval is how often fence reads the source's resourceVersion.
const fencePollInterval = 200 * time.Millisecond

// fence waits, before the first lists of the source (Run), until the source's resourceVersion
// has moved past the one it reads first, for at most Config.FenceTimeout. Every resourceVersion
// a previous run of the server handed out (an object's, a list's, a bookmark's) is at most the
// source's resourceVersion when that run ended, so at most the first one read here; the first
// lists then have resourceVersions above it. So the objects a first list shows at its own
// resourceVersion (settleFirstListed) show one no client has seen, and a watch resumed from
// any resourceVersion of a previous run answers 410, so that its client relists, instead of
// continuing from a state whose content this run shows differently (docs/views.md, "Restarts
// and replicas").
//
// A source that nobody writes to does not move: kube-apiserver renews its identity Lease every
// 10 seconds, and each mapper its location's Lease, so the wait is short. When it times out, or
// the source cannot be read, the lists start anyway (logged): a client that held the newest
// resourceVersion of the previous run may then keep an object's old generation until its next
// change. gvr is a mirrored resource, whose consistent-read probe reads the resourceVersion.
func (c *Cache) fence(ctx context.Context, gvr schema.GroupVersionResource) {
	timeout := c.cfg.FenceTimeout
	if timeout <= 0 {
		return
	}
	start := time.Now()
	var first, last uint64
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, fencePollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		rv, err := c.cfg.Source.ResourceVersion(ctx, gvr)
		if err != nil {
			lastErr = err
			return false, nil
		}
		if first == 0 {
			first = rv
			return false, nil
		}
		last = rv
		return rv > first, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		errText := ""
		if lastErr != nil {
			errText = contract.Truncate(lastErr.Error(), maxLoggedValue)
		}
		klog.InfoS("The source's resourceVersion did not move past the one read at start-up in time; listing anyway (an object's generation may show at a resourceVersion of the previous run with another value until its next change)",
			"timeout", timeout, "resourceVersion", first, "err", errText)
		return
	}
	klog.V(1).InfoS("The source moved past the resourceVersion read at start-up; listing it",
		"startResourceVersion", first, "resourceVersion", last, "waited", time.Since(start).Round(time.Millisecond))
}
