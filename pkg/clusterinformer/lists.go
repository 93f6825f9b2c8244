package clusterinformer

import "k8s.io/client-go/tools/cache"

// WithoutStreamingLists returns lw for a reflector that lists with paginated lists, never with
// streaming lists (KEP-3157), whatever KUBE_FEATURE_WatchListClient says. A streaming list
// collects its initial events in a temporary store keyed by namespace/name (client-go's
// reflector hard-codes DeletionHandlingMetaNamespaceKeyFunc there), so objects of two logical
// clusters with the same namespace/name would overwrite each other before a cluster-keyed store
// sees them. Every Informer lists this way; a test or benchmark comparing it with client-go's
// informers gives them the same lists with it.
func WithoutStreamingLists(lw *cache.ListWatch) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(lw, noStreamingLists{})
}

// noStreamingLists declares that its client does not support streaming lists.
type noStreamingLists struct{}

// IsWatchListSemanticsUnSupported reports true: see WithoutStreamingLists.
func (noStreamingLists) IsWatchListSemanticsUnSupported() bool { return true }
