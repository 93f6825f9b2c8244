package kcpproxy

import (
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// scope is what one resource request addresses, in the logical cluster's terms.
type scope struct {
	// cluster is the logical cluster of the path, or Wildcard.
	cluster string
	// namespace is the request's namespace in the cluster (for the namespaces resource, the
	// namespace named by the path), "" for all.
	namespace string
	// namespaces is true for the core/v1 namespaces resource, whose object names are the
	// namespaces themselves and are stored as backing namespaces.
	namespaces bool
	// gr is the requested resource, for Status errors.
	gr schema.GroupResource
}

// nameField is the metadata field that holds a backing namespace: the name of a Namespace,
// the namespace of every other object.
func (s scope) nameField() string {
	if s.namespaces {
		return "name"
	}
	return "namespace"
}

// fromBacking rewrites obj, an object as the backing server returned it, into the logical
// cluster's terms (namespace, or a Namespace's name and its kubernetes.io/metadata.name label,
// and kcp.io/cluster) and returns true; it
// returns false, leaving obj alone, when obj is not part of the request's scope (stored
// outside any logical cluster, in another cluster, or in another namespace).
func (s scope) fromBacking(obj map[string]interface{}) bool {
	meta, _ := obj["metadata"].(map[string]interface{})
	if meta == nil {
		return false
	}
	b, _ := meta[s.nameField()].(string)
	cluster, ns, ok := SplitBackingNamespace(b)
	if !ok || (s.cluster != Wildcard && cluster != s.cluster) || (s.namespace != "" && ns != s.namespace) {
		return false
	}
	meta[s.nameField()] = ns
	if labels, _ := meta["labels"].(map[string]interface{}); s.namespaces && labels[corev1.LabelMetadataName] == b {
		labels[corev1.LabelMetadataName] = ns
	}
	ann, _ := meta["annotations"].(map[string]interface{})
	if ann == nil {
		ann = map[string]interface{}{}
		meta["annotations"] = ann
	}
	ann[contract.ClusterAnnotation] = cluster
	return true
}

// toBacking rewrites obj, a request body (an object, or the object of a merge, strategic merge
// or apply patch), into the backing server's terms: a namespace, or a Namespace's name, gets
// the cluster's prefix, and kcp.io/cluster is removed when it names the request's cluster. A
// kcp.io/cluster naming another cluster, or null (removal in a patch), is a 422 Invalid: kcp
// never changes an object's cluster.
func (s scope) toBacking(obj map[string]interface{}) error {
	meta, _ := obj["metadata"].(map[string]interface{})
	if meta == nil {
		return nil
	}
	if v, ok := meta[s.nameField()].(string); ok && v != "" {
		b, err := BackingNamespace(s.cluster, v)
		if err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		meta[s.nameField()] = b
	}
	if g, ok := meta["generateName"].(string); ok && g != "" && s.namespaces {
		meta["generateName"] = s.cluster + Separator + g
	}
	return s.checkClusterAnnotation(meta["annotations"])
}

// checkClusterAnnotation removes kcp.io/cluster from annotations (a JSON object of a request
// body) when it names the request's cluster, and returns a 422 Invalid when it is present with
// any other value.
func (s scope) checkClusterAnnotation(annotations interface{}) error {
	ann, _ := annotations.(map[string]interface{})
	v, present := ann[contract.ClusterAnnotation]
	if !present {
		return nil
	}
	if str, ok := v.(string); ok && str == s.cluster {
		delete(ann, contract.ClusterAnnotation)
		return nil
	}
	return s.immutable(v)
}

// immutable is the 422 of a write that would change kcp.io/cluster to v.
func (s scope) immutable(v interface{}) error {
	path := field.NewPath("metadata", "annotations").Key(contract.ClusterAnnotation)
	return apierrors.NewInvalid(schema.GroupKind{Group: s.gr.Group, Kind: s.gr.Resource}, "",
		field.ErrorList{field.Invalid(path, v, fmt.Sprintf("field is immutable: the object is in logical cluster %q", s.cluster))})
}

// annotationPointer is the RFC 6901 pointer of kcp.io/cluster.
var annotationPointer = "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(contract.ClusterAnnotation, "~", "~0"), "/", "~1")

// jsonPatchToBacking rewrites the operations of an RFC 6902 JSON patch like toBacking: values
// at the namespace (or a Namespace's name) get the cluster's prefix; an operation that sets
// kcp.io/cluster to the request's cluster (or tests for it) is dropped, any other operation on
// it is a 422 Invalid. It returns the operations to forward.
func (s scope) jsonPatchToBacking(ops []interface{}) ([]interface{}, error) {
	out := make([]interface{}, 0, len(ops))
	for _, o := range ops {
		op, _ := o.(map[string]interface{})
		if op == nil {
			out = append(out, o)
			continue
		}
		path, _ := op["path"].(string)
		kind, _ := op["op"].(string)
		// A move or copy from the annotation or from a map holding it (the proxy cannot tell what it held).
		if from, _ := op["from"].(string); from != "" && (from == annotationPointer || strings.HasPrefix(annotationPointer, from+"/")) {
			return nil, s.immutable(nil)
		}
		value, hasValue := op["value"]
		switch {
		case path == annotationPointer:
			if str, ok := value.(string); ok && str == s.cluster && (kind == "add" || kind == "replace" || kind == "test") {
				continue
			}
			return nil, s.immutable(value)
		case path == "/metadata/"+s.nameField() && hasValue:
			if str, ok := value.(string); ok && str != "" {
				b, err := BackingNamespace(s.cluster, str)
				if err != nil {
					return nil, apierrors.NewBadRequest(err.Error())
				}
				op["value"] = b
			}
		case path == "/metadata/annotations" && hasValue:
			if err := s.checkClusterAnnotation(value); err != nil {
				return nil, err
			}
		case path == "/metadata" && hasValue:
			if m, ok := value.(map[string]interface{}); ok {
				if err := s.toBacking(map[string]interface{}{"metadata": m}); err != nil {
					return nil, err
				}
			}
		case path == "" && hasValue:
			if m, ok := value.(map[string]interface{}); ok {
				if err := s.toBacking(m); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, op)
	}
	return out, nil
}

// fieldSelectorToBacking rewrites a fieldSelector on metadata.namespace (metadata.name of
// namespaces) in q to the backing namespace. On the wildcard endpoint such a selector cannot be
// expressed and is a 400.
func (s scope) fieldSelectorToBacking(q url.Values) error {
	raw := q.Get("fieldSelector")
	if raw == "" {
		return nil
	}
	sel, err := fields.ParseSelector(raw)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	name := "metadata." + s.nameField()
	sel, err = sel.Transform(func(f, v string) (string, string, error) {
		if f != name {
			return f, v, nil
		}
		if s.cluster == Wildcard {
			return "", "", fmt.Errorf("kcpproxy does not emulate a field selector on %s on the wildcard endpoint", name)
		}
		b, err := BackingNamespace(s.cluster, v)
		return f, b, err
	})
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	q.Set("fieldSelector", sel.String())
	return nil
}

// statusFromBacking rewrites a Status of the backing server: the backing namespace of the
// request reads as the cluster's namespace in its message and details.
func (s scope) statusFromBacking(obj map[string]interface{}) {
	if s.cluster == Wildcard || s.namespace == "" {
		return
	}
	b, err := BackingNamespace(s.cluster, s.namespace)
	if err != nil {
		return
	}
	if msg, ok := obj["message"].(string); ok {
		obj["message"] = strings.ReplaceAll(msg, b, s.namespace)
	}
	if details, ok := obj["details"].(map[string]interface{}); ok {
		if name, _ := details["name"].(string); name == b {
			details["name"] = s.namespace
		}
		causes, _ := details["causes"].([]interface{})
		for _, c := range causes {
			if cause, ok := c.(map[string]interface{}); ok {
				if msg, ok := cause["message"].(string); ok {
					cause["message"] = strings.ReplaceAll(msg, b, s.namespace)
				}
			}
		}
	}
}

// responseFromBacking rewrites a decoded response body of the backing server: a Status (see
// statusFromBacking), a list (items outside the scope are dropped, the others rewritten), or
// one object.
func (s scope) responseFromBacking(obj map[string]interface{}) {
	kind, _ := obj["kind"].(string)
	if kind == "Status" {
		s.statusFromBacking(obj)
		return
	}
	if items, ok := obj["items"].([]interface{}); ok && strings.HasSuffix(kind, "List") {
		kept := make([]interface{}, 0, len(items))
		for _, i := range items {
			if item, ok := i.(map[string]interface{}); ok && s.fromBacking(item) {
				kept = append(kept, item)
			}
		}
		obj["items"] = kept
		return
	}
	s.fromBacking(obj)
}

// watchEventFromBacking rewrites one watch frame ({"type", "object"}) and returns false when
// it is to be dropped (an object outside the scope). Bookmarks carry no object identity and
// pass unchanged; ERROR frames carry a Status.
func (s scope) watchEventFromBacking(ev *watchEvent) bool {
	switch watch.EventType(ev.Type) {
	case watch.Bookmark:
		return true
	case watch.Error:
		s.statusFromBacking(ev.Object)
		return true
	}
	return s.fromBacking(ev.Object)
}

// watchEvent is one frame of a JSON watch stream: metav1.WatchEvent with the object decoded.
type watchEvent struct {
	Type   string                 `json:"type"`
	Object map[string]interface{} `json:"object"`
}
