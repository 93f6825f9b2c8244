package contract

import "strings"

// Key identifies a source object across logical clusters.
//
// Its form is "cluster|namespace/name", or "cluster|name" for cluster-scoped objects. Keys are
// ordered as strings; List pages and the per-location B-trees use that order. Object names
// cannot contain "/" and logical cluster names cannot contain "|", so two different objects
// never share a Key.
type Key string

// NewKey returns the Key of the object namespace/name in the logical cluster cluster.
// namespace is "" for cluster-scoped objects.
func NewKey(cluster, namespace, name string) Key {
	var b strings.Builder
	b.Grow(len(cluster) + len(namespace) + len(name) + 2)
	b.WriteString(cluster)
	b.WriteByte('|')
	if namespace != "" {
		b.WriteString(namespace)
		b.WriteByte('/')
	}
	b.WriteString(name)
	return Key(b.String())
}

// Split returns the logical cluster, namespace and name encoded in k. For a string that is
// not a valid Key it returns ok=false.
func (k Key) Split() (cluster, namespace, name string, ok bool) {
	s := string(k)
	i := strings.IndexByte(s, '|')
	if i < 0 {
		return "", "", "", false
	}
	cluster, rest := s[:i], s[i+1:]
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		namespace, name = rest[:j], rest[j+1:]
	} else {
		name = rest
	}
	if name == "" {
		return "", "", "", false
	}
	return cluster, namespace, name, true
}
