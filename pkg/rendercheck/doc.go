// Package rendercheck decides what a rendering may change. A location's view shows a source
// object rendered for it: the Customizations that select it, then its own
// spec-diff.kcp.io/<location> patch (docs/customization.md). Whatever produced a rendering, it
// may not change what identifies the object or what the system marks it with, and it may not
// be larger than a stored object may be (docs/design.md, "The control plane objects": no
// mutation can change an object's identity or the system's marks). Every rendering path
// asks this package, and only this package, so there is one rule:
//
//   - [Changed] compares a rendering with its input and names the first protected field whose
//     value differs;
//   - [ModifiesProtected] tells, before a JSON patch runs, whether an operation on a JSON
//     pointer could change a protected field (the pointer is one, below one, or an ancestor of
//     one: the whole object, /metadata, /metadata/labels, /metadata/annotations);
//   - [TooLarge] bounds a rendering's size, as kube-apiserver bounds a request body;
//   - [Check] is Changed and TooLarge together, the check every path runs on its result.
//
// A refused rendering is a *Refusal; the callers keep the location's last rendering or
// withhold the object (docs/customization.md, "Failures never delete").
package rendercheck
