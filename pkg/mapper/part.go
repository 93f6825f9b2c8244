package mapper

import (
	"strings"

	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// PartConfig returns the client config of part of the view whose whole-location config is
// view: a copy with part's path (contract.ViewPart.Path) appended to its Host, so that
// informers, discovery and lists through it see only the part (docs/views.md, "Shards"). The
// mapper and `mapper verify` read their part through it.
func PartConfig(view *rest.Config, part contract.ViewPart) *rest.Config {
	cfg := rest.CopyConfig(view)
	cfg.Host = strings.TrimSuffix(cfg.Host, "/") + part.Path()
	return cfg
}

// owns reports whether the copies of source ref are this mapper's: ref's logical cluster and
// namespace are in its part (Config.Part). It is the precondition of every write the mapper
// makes for a source object, destructive or not: a mapper that shares its location with
// other shards never applies, deletes, unmarks or writes status or finalizers for another
// shard's objects, whatever it sees on the shared target (a copy of another shard deleted or
// changed there is that shard's to repair).
func (m *Mapper) owns(ref SourceRef) bool { return m.cfg.Part.Contains(ref.Cluster, ref.Namespace) }
