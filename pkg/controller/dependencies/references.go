package dependencies

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/cluster-mapper/cluster-mapper/pkg/dependencies"
)

// memoEntry is what one version of a referencing object references, apart from the objects
// that select it (those change with them).
type memoEntry struct {
	resourceVersion string
	// template is what its Pod template references, with the template's labels.
	hasTemplate bool
	labels      map[string]string
	template    []dependencies.Reference
	templateErr error
	// rules are the references each DependencyRule returned, by rule name.
	rules map[string]ruleMemo
	// related are the selections of the entries of origin Source of ResourceMappings, by
	// relatedState.memoKey.
	related map[string]relatedMemo
}

// relatedMemo is one ResourceMapping entry's selection for one object version.
type relatedMemo struct {
	uid        types.UID
	generation int64
	sel        dependencies.Selection
	err        error
}

// relatedFound is what an entry of origin Source found from one object: its related objects
// follow it only to within, the locations of the entry's mapping.
type relatedFound struct {
	sel    dependencies.Selection
	within sets.Set[string]
}

// ruleMemo is one rule's result for one object version.
type ruleMemo struct {
	uid        types.UID
	generation int64
	refs       []dependencies.Reference
	err        error
}

// referencing is a resource whose objects reference others: it holds Pod templates, or
// DependencyRules or ResourceMappings (entries of origin Source) name it.
type referencing struct {
	gvr      schema.GroupVersionResource
	template bool
	rules    []*ruleState
	related  []*relatedState
	watched
}

// references returns what u, an object of r, references: its Pod template's references and
// the Services, HPAs and PDBs of selectors that select or target it, and the results of r's
// DependencyRules; and what the entries of origin Source of ResourceMappings of r found
// (related). ok is false when some of it is unknown: the template does not decode, a rule or
// mapping does not compile or fails on u (each failure is added to failures, by rule name or
// mappingFailureKey and "namespace/name"). The per-version parts are memoized by uid and
// resourceVersion (and the rule's or mapping's generation).
func (c *Controller) references(ctx context.Context, r referencing, u *unstructured.Unstructured, selectors *dependencies.Selectors, failures map[string]map[string]string) (refs []dependencies.Reference, related []relatedFound, ok bool) {
	c.mu.Lock()
	m := c.memo[u.GetUID()]
	c.mu.Unlock()
	if m == nil || m.resourceVersion != u.GetResourceVersion() {
		m = &memoEntry{resourceVersion: u.GetResourceVersion(), rules: map[string]ruleMemo{}, related: map[string]relatedMemo{}}
		if r.template {
			pt, err := dependencies.TemplateOf(r.gvr, u.Object)
			m.templateErr = err
			if pt != nil {
				m.hasTemplate, m.labels, m.template = true, pt.Labels, dependencies.SpecReferences(&pt.Spec)
			}
		}
	}
	ok = m.templateErr == nil
	lists := [][]dependencies.Reference{m.template}
	if m.hasTemplate {
		lists = append(lists, selectors.References(u.GroupVersionKind().GroupKind(), u.GetName(), m.labels))
	}
	for _, rs := range r.rules {
		if rs.rule == nil {
			ok = false
			continue
		}
		rm, found := m.rules[rs.obj.Name]
		if !found || rm.uid != rs.obj.UID || rm.generation != rs.obj.Generation {
			refs, err := rs.rule.References(ctx, u.Object)
			rm = ruleMemo{uid: rs.obj.UID, generation: rs.obj.Generation, refs: refs, err: err}
			if ctx.Err() == nil {
				m.rules[rs.obj.Name] = rm
			}
		}
		if rm.err != nil {
			ok = false
			addFailure(failures, rs.obj.Name, u, rm.err.Error())
			continue
		}
		lists = append(lists, rm.refs)
	}
	for _, rs := range r.related {
		if rs.related == nil {
			ok = false
			continue
		}
		rm, found := m.related[rs.memoKey()]
		if !found || rm.uid != rs.mapping.UID || rm.generation != rs.mapping.Generation {
			sel, err := rs.related.Select(ctx, u.Object)
			rm = relatedMemo{uid: rs.mapping.UID, generation: rs.mapping.Generation, sel: sel, err: err}
			if ctx.Err() == nil {
				m.related[rs.memoKey()] = rm
			}
		}
		if rm.err != nil {
			ok = false
			addFailure(failures, mappingFailureKey(rs.mapping.Name), u, "spec.related["+rs.related.Identifier+"]."+rm.err.Error())
			continue
		}
		if !rm.sel.Empty() {
			related = append(related, relatedFound{sel: rm.sel, within: rs.within})
		}
	}
	c.mu.Lock()
	c.memo[u.GetUID()] = m
	c.mu.Unlock()
	return dependencies.Merge(lists...), related, ok
}

// addFailure records msg as the failure of u under key (a rule name or mappingFailureKey).
func addFailure(failures map[string]map[string]string, key string, u *unstructured.Unstructured, msg string) {
	if failures[key] == nil {
		failures[key] = map[string]string{}
	}
	failures[key][u.GetNamespace()+"/"+u.GetName()] = msg
}
