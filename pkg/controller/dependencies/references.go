package dependencies

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

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
}

// ruleMemo is one rule's result for one object version.
type ruleMemo struct {
	uid        types.UID
	generation int64
	refs       []dependencies.Reference
	err        error
}

// referencing is a resource whose objects reference others: it holds Pod templates, or
// DependencyRules name it, or both.
type referencing struct {
	gvr      schema.GroupVersionResource
	template bool
	rules    []*ruleState
	watched
}

// references returns what u, an object of r, references: its Pod template's references and
// the Services, HPAs and PDBs of selectors that select or target it, and the results of r's
// DependencyRules. ok is false when some of it is unknown: the template does not decode, a
// rule does not compile or fails on u (each rule failure is added to failures, by rule name
// and "namespace/name"). The per-version parts are memoized by uid and resourceVersion (and
// the rule's generation).
func (c *Controller) references(ctx context.Context, r referencing, u *unstructured.Unstructured, selectors *dependencies.Selectors, failures map[string]map[string]string) (refs []dependencies.Reference, ok bool) {
	c.mu.Lock()
	m := c.memo[u.GetUID()]
	c.mu.Unlock()
	if m == nil || m.resourceVersion != u.GetResourceVersion() {
		m = &memoEntry{resourceVersion: u.GetResourceVersion(), rules: map[string]ruleMemo{}}
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
			if failures[rs.obj.Name] == nil {
				failures[rs.obj.Name] = map[string]string{}
			}
			failures[rs.obj.Name][u.GetNamespace()+"/"+u.GetName()] = rm.err.Error()
			continue
		}
		lists = append(lists, rm.refs)
	}
	c.mu.Lock()
	c.memo[u.GetUID()] = m
	c.mu.Unlock()
	return dependencies.Merge(lists...), ok
}
