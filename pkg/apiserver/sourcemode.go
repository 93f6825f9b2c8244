package apiserver

// Source modes (--source-mode), docs/design.md, "Names" (logical cluster of a source object).
const (
	// SourceModePlain is a plain Kubernetes source: one logical cluster, named by
	// --cluster-name; a kcp.io/cluster annotation a user wrote on an object is ignored.
	SourceModePlain = "plain"
	// SourceModeKCP is a kcp source read through its wildcard endpoint (the kubeconfig's server
	// ends with /clusters/*): each object's logical cluster is its kcp.io/cluster annotation,
	// and reads by name and writes go to the cluster's own path (--source-cluster-path).
	SourceModeKCP = "kcp"
)
