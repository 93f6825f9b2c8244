package customization

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
	"github.com/cluster-mapper/cluster-mapper/pkg/specdiff"
)

// Rules is one immutable snapshot of the per-location rendering rules (Customizations and the
// locations' SyncTarget labels/annotations) at one source resourceVersion; *Snapshot implements
// it. It is declared here rather than in pkg/cache because Differs takes a Rules: for *Snapshot
// to implement pkg/cache's interface, the parameter types must be identical, and pkg/cache
// imports this package (Empty, RenderError), so pkg/cache uses this type (an alias).
type Rules interface {
	// ResourceVersion is the source resourceVersion of the newest change this snapshot holds
	// (the Customization's or SyncTarget's metadata.resourceVersion, or the DELETED event's).
	ResourceVersion() uint64
	// Touches reports whether Render may change obj for location: a Customization selects
	// (gvr, obj, location), or obj carries spec-diff.kcp.io/<location>. Cheap (no CEL):
	// selectors only.
	Touches(gvr schema.GroupVersionResource, cluster string, obj *unstructured.Unstructured, location string) bool
	// Render returns a new object: obj as customized for location (the Customizations that
	// select it, in name order, then its spec-diff.kcp.io/<location> RFC 6902 patch). obj is
	// not modified. The error, when not nil, is a *RenderError naming what failed.
	Render(ctx context.Context, gvr schema.GroupVersionResource, cluster string, obj *unstructured.Unstructured, location string) (*unstructured.Unstructured, error)
	// Differs reports whether an object of gvr in cluster and namespace (namespace "" for a
	// cluster-scoped resource) with labels objLabels may render differently for location
	// under this snapshot than under old (selectors and the Customizations' content, and the
	// location's labels/annotations compared; false means surely the same). A nil old is
	// Empty(). It reads nothing else of the object, so a caller holding an object's metadata
	// need not decode it.
	Differs(old Rules, gvr schema.GroupVersionResource, cluster, namespace string, objLabels labels.Labels, location string) bool
	// Bindings returns the locations bound to each namespace (docs/tenancy.md): a view shows
	// an object only to the locations bound to its namespace. nil binds every location (the
	// Open location-access mode).
	Bindings() *locationbinding.Index
}

var _ Rules = (*Snapshot)(nil)

// Options configure a Compiler.
type Options struct {
	// PlainCluster is the logical cluster of every Customization of a plain source (the
	// mapper-apiserver's --cluster-name; a kcp.io/cluster annotation on a Customization is
	// then ignored, as on every object of a plain source). Empty: a kcp source, where a
	// Customization's cluster is its kcp.io/cluster annotation.
	PlainCluster string
	// Limits bound what one namespace's Customizations may ask of the server.
	Limits Limits
	// TypeConverters give the schema of a kind for ApplyConfiguration mutations
	// (k8s.io/apiserver's patch.NewTypeConverterManager over the source's OpenAPI v3, as
	// kube-apiserver's MutatingAdmissionPolicy plugin uses). Nil: ApplyConfiguration mutations
	// fail to render (ReasonMutationFailed, "no schema"); JSONPatch mutations need none.
	TypeConverters patch.TypeConverterManager
	// MaxRenderingBytes bounds the size of a rendering after each mutation
	// (rendercheck.TooLarge: 0 is rendercheck.DefaultMaxBytes, negative no bound), so that a
	// rendering that grows past it stops there and nothing larger is kept.
	MaxRenderingBytes int64
}

// Compiler builds Snapshots and keeps the compiled Customizations between them, so that a
// change of one Customization or of a SyncTarget compiles nothing else. Safe for concurrent use.
type Compiler struct {
	opts Options

	mu    sync.Mutex
	cache map[RuleKey]*compiled
}

// NewCompiler returns a Compiler with opts.
func NewCompiler(opts Options) *Compiler {
	return &Compiler{opts: opts, cache: map[RuleKey]*compiled{}}
}

// Snapshot compiles customizations (reusing what is compiled when the spec is unchanged) and
// returns the snapshot at resourceVersion rv with these locations, and every compile error. A
// Customization that does not compile is kept: objects it selects fail to render.
// Customizations marked for deletion (a deletionTimestamp) are left out. The arguments are not
// kept; the label and annotation maps of locations are (read only).
func (c *Compiler) Snapshot(rv uint64, customizations []*controlv1alpha1.Customization, locations []Location) (*Snapshot, []CompileError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &Snapshot{rv: rv, opts: c.opts, scopes: map[scope][]*compiled{}, locations: make(map[string]*locationInfo, len(locations))}
	for _, l := range locations {
		s.locations[l.Name] = newLocation(l)
	}
	var errs []CompileError
	seen := make(map[RuleKey]bool, len(customizations))
	created := make(map[RuleKey]metav1.Time, len(customizations))
	for _, cz := range customizations {
		if cz.DeletionTimestamp != nil {
			continue
		}
		cluster := c.opts.PlainCluster
		if cluster == "" {
			cluster = cz.Annotations[contract.ClusterAnnotation]
		}
		key, fp := RuleKey{Cluster: cluster, Namespace: cz.Namespace, Name: cz.Name}, fingerprint(&cz.Spec)
		r := c.cache[key]
		if r == nil || r.fingerprint != fp {
			r = compile(cz, key, fp)
			c.cache[key] = r
		}
		seen[r.key] = true
		created[r.key] = cz.CreationTimestamp
		errs = append(errs, r.errs...)
		sc := scope{cluster: r.key.Cluster, namespace: r.key.Namespace}
		s.scopes[sc] = append(s.scopes[sc], r)
	}
	for k := range c.cache {
		if !seen[k] {
			delete(c.cache, k)
		}
	}
	s.errs = errs
	for sc, rs := range s.scopes {
		s.limit(rs, created)
		slices.SortFunc(rs, func(a, b *compiled) int { return strings.Compare(a.key.Name, b.key.Name) })
		s.scopes[sc] = rs
	}
	return s, errs
}

// Limits bound what the Customizations of one namespace (of a logical cluster) may ask of the
// server (docs/customization.md, "Fairness and budgets"). A Customization is applied when,
// together with the older applied Customizations of its namespace (by creationTimestamp, then
// name), it stays within both limits; the others are limited: every object one selects fails
// to render with ReasonLimitExceeded (the views keep the last rendering, never show the object
// without it), and its status says Degraded. A new Customization so never displaces an older
// one. Zero fields: no limit. A ResourceQuota on count/customizations.control.mapper.kcp.io
// refuses extra Customizations at admission instead (docs/customization.md).
type Limits struct {
	// CustomizationsPerNamespace is the most Customizations of a namespace that are applied.
	CustomizationsPerNamespace int
	// MutationsPerNamespace is the most mutations (spec.mutations) that the applied
	// Customizations of a namespace have together.
	MutationsPerNamespace int
}

// Defaults of Limits (mapper-apiserver's flags).
const (
	// DefaultMaxCustomizationsPerNamespace: a namespace's Customizations applied at most.
	DefaultMaxCustomizationsPerNamespace = 64
	// DefaultMaxMutationsPerNamespace: the mutations of a namespace's applied Customizations
	// at most; eight Customizations of the CRD's most (32).
	DefaultMaxMutationsPerNamespace = 256
)

// limit replaces in rs (the Customizations of one namespace) those over s's Limits by limited
// copies, and records them in s.limited. created holds each one's creationTimestamp.
func (s *Snapshot) limit(rs []*compiled, created map[RuleKey]metav1.Time) {
	l := s.opts.Limits
	if l.CustomizationsPerNamespace <= 0 && l.MutationsPerNamespace <= 0 {
		return
	}
	order := slices.Clone(rs)
	slices.SortFunc(order, func(a, b *compiled) int {
		ta, tb := created[a.key], created[b.key]
		switch {
		case ta.Before(&tb):
			return -1
		case tb.Before(&ta):
			return 1
		}
		return strings.Compare(a.key.Name, b.key.Name)
	})
	limited := map[*compiled]string{}
	count, mutations := 0, 0
	for _, r := range order {
		switch {
		case l.CustomizationsPerNamespace > 0 && count+1 > l.CustomizationsPerNamespace:
			limited[r] = fmt.Sprintf("the namespace has %d older Customizations, the most applied per namespace (--max-customizations-per-namespace)", count)
		case l.MutationsPerNamespace > 0 && mutations+r.mutations > l.MutationsPerNamespace:
			limited[r] = fmt.Sprintf("its %d mutations and the %d of the namespace's older Customizations are more than the %d applied per namespace (--max-mutations-per-namespace)",
				r.mutations, mutations, l.MutationsPerNamespace)
		default:
			count++
			mutations += r.mutations
		}
	}
	for i, r := range rs {
		msg, ok := limited[r]
		if !ok {
			continue
		}
		c := *r
		c.limited = "the Customization is not applied: " + msg
		rs[i] = &c
		if s.limited == nil {
			s.limited = map[RuleKey]string{}
		}
		s.limited[r.key] = c.limited
	}
}

// Limited returns the Customizations the snapshot does not apply because of its namespace's
// Limits, with the reason (read only).
func (s *Snapshot) Limited() map[RuleKey]string {
	if s == nil {
		return nil
	}
	return s.limited
}

// fingerprintOf returns the fingerprint of the compiled Customization key (zero if none).
func (c *Compiler) fingerprintOf(key RuleKey) [32]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.cache[key]; r != nil {
		return r.fingerprint
	}
	return [32]byte{}
}

// NewSnapshot compiles customizations into the snapshot at resourceVersion rv with these
// locations, for a kcp source (a Customization's cluster is its kcp.io/cluster annotation, ""
// when absent) and without schemas for ApplyConfiguration; a Compiler with Options does the
// rest. See Compiler.Snapshot.
func NewSnapshot(rv uint64, customizations []*controlv1alpha1.Customization, locations []Location) (*Snapshot, []CompileError) {
	return NewCompiler(Options{}).Snapshot(rv, customizations, locations)
}

// empty is the snapshot without Customizations.
var empty = &Snapshot{}

// Empty returns the snapshot without Customizations or locations, at resourceVersion 0: it
// renders an object by applying only its spec-diff.kcp.io/<location> patch.
func Empty() *Snapshot { return empty }

// Snapshot is an immutable set of compiled Customizations and locations at one source
// resourceVersion. It implements Rules; a nil *Snapshot behaves as Empty().
type Snapshot struct {
	rv   uint64
	opts Options
	// scopes are the Customizations per namespace (and logical cluster), in name order: a
	// Customization selects only objects of its own namespace and cluster.
	scopes    map[scope][]*compiled
	locations map[string]*locationInfo
	errs      []CompileError
	// limited are the Customizations over their namespace's Limits, with the reason.
	limited map[RuleKey]string
	// bindings are the bound locations of each namespace (bindings.go); nil: every location.
	bindings *locationbinding.Index
}

// CompileErrors returns the compile errors of the snapshot's Customizations (read only).
func (s *Snapshot) CompileErrors() []CompileError {
	if s == nil {
		return nil
	}
	return s.errs
}

// scope is a namespace of a logical cluster.
type scope struct {
	cluster, namespace string
}

// ResourceVersion implements Rules.
func (s *Snapshot) ResourceVersion() uint64 {
	if s == nil {
		return 0
	}
	return s.rv
}

// Location returns the location named name as the snapshot knows it: its SyncTarget's labels
// and annotations, or only the name when it has no SyncTarget.
func (s *Snapshot) Location(name string) Location {
	return s.location(name).Location
}

// location returns the prepared location named name (a location without SyncTarget has no
// labels).
func (s *Snapshot) location(name string) *locationInfo {
	if s != nil {
		if l := s.locations[name]; l != nil {
			return l
		}
	}
	return newLocation(Location{Name: name})
}

// locationRef is the location named name of a snapshot, prepared (Snapshot.location) only when
// a Customization that selects an object asks for it. Most objects are selected by none, and
// preparing a location without SyncTarget, or any location for a nil snapshot, allocates its
// label set and CEL value: the cache asks Differs for every location of every object it stores
// from bytes, and that garbage was 165 MB over a first sync of 50k objects (bench scenario 4),
// interleaved with the objects the cache keeps. A locationRef is used by one goroutine.
type locationRef struct {
	s    *Snapshot
	name string
	info *locationInfo
}

// get returns the prepared location, preparing it on first use.
func (r *locationRef) get() *locationInfo {
	if r.info == nil {
		r.info = r.s.location(r.name)
	}
	return r.info
}

// Touches implements Rules. It allocates nothing for an object no Customization selects.
func (s *Snapshot) Touches(gvr schema.GroupVersionResource, cluster string, obj *unstructured.Unstructured, location string) bool {
	if specdiff.Has(obj, location) {
		return true
	}
	if s == nil {
		return false
	}
	rs := s.scopes[scope{cluster: cluster, namespace: obj.GetNamespace()}]
	if len(rs) == 0 {
		return false
	}
	return len(s.selecting(gvr, cluster, obj.GetNamespace(), unstructuredLabels(labelsOf(obj)), &locationRef{s: s, name: location})) > 0
}

// selecting returns the Customizations that select an object of gvr in cluster and namespace
// with labels objLabels for loc, in name order. loc is prepared only when a Customization
// selects the object; nothing is allocated when none selects it for loc.
func (s *Snapshot) selecting(gvr schema.GroupVersionResource, cluster, namespace string, objLabels labels.Labels, loc *locationRef) []*compiled {
	if s == nil {
		return nil
	}
	var out []*compiled
	for _, r := range s.scopes[scope{cluster: cluster, namespace: namespace}] {
		if r.selectsObject(gvr, cluster, namespace, objLabels) && r.selectsLocation(loc.get()) {
			out = append(out, r)
		}
	}
	return out
}

// Differs implements Rules: true when the Customizations selecting (gvr, obj, location)
// differ between old and s (another set, order, or spec), or when some select it and the
// location's name, labels or annotations differ. An old that is not a *Snapshot (another
// implementation) always differs. The object's own spec-diff patch is the same under both.
func (s *Snapshot) Differs(old Rules, gvr schema.GroupVersionResource, cluster, namespace string, objLabels labels.Labels, location string) bool {
	var o *Snapshot
	switch v := old.(type) {
	case nil:
	case *Snapshot:
		o = v
	default:
		return true
	}
	if o == s {
		return false
	}
	newLoc, oldLoc := &locationRef{s: s, name: location}, &locationRef{s: o, name: location}
	now, before := s.selecting(gvr, cluster, namespace, objLabels, newLoc), o.selecting(gvr, cluster, namespace, objLabels, oldLoc)
	if !slices.EqualFunc(now, before, (*compiled).sameAs) {
		return true
	}
	return len(now) > 0 && !newLoc.get().Equal(oldLoc.get().Location)
}

// labelsOf returns obj's metadata.labels in place (nil when none).
func labelsOf(obj *unstructured.Unstructured) map[string]interface{} {
	m, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "labels")
	l, _ := m.(map[string]interface{})
	return l
}
