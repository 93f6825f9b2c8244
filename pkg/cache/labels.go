package cache

import (
	"sort"

	"k8s.io/apimachinery/pkg/labels"
)

// objectLabels are an object's labels as a flat list of key/value pairs sorted by key
// (k0, v0, k1, v1, ...): the label selectors of every LIST and watch read them
// (labels.Labels), and a list of a few strings holds a third of the memory of a Go map of them.
// Immutable once made.
type objectLabels []string

var _ labels.Labels = objectLabels(nil)

// newObjectLabels returns m as objectLabels; intern, when not nil, returns the canonical copy
// of each key and value (rawjson.Interner.Get), so that the labels many objects share are held once.
func newObjectLabels(m map[string]string, intern func(string) string) objectLabels {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(objectLabels, 0, 2*len(m))
	for _, k := range keys {
		v := m[k]
		if intern != nil {
			k, v = intern(k), intern(v)
		}
		out = append(out, k, v)
	}
	return out
}

// Lookup implements labels.Labels: the value of label and whether the object has it.
func (l objectLabels) Lookup(label string) (string, bool) {
	n := len(l) / 2
	i := sort.Search(n, func(i int) bool { return l[2*i] >= label })
	if i < n && l[2*i] == label {
		return l[2*i+1], true
	}
	return "", false
}

// Has implements labels.Labels.
func (l objectLabels) Has(label string) bool {
	_, ok := l.Lookup(label)
	return ok
}

// Get implements labels.Labels: the value of label, "" when the object does not have it.
func (l objectLabels) Get(label string) string {
	v, _ := l.Lookup(label)
	return v
}
