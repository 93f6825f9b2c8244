// Package contract holds the names and formats of docs/design.md that every part of
// cluster-mapper agrees on, in one place: the annotation and label keys, location and logical
// cluster names, the object key, the URL of a location view, and the parser of a request inside a
// view.
//
// It is a leaf package: it imports only the Kubernetes libraries, never another package of this
// project, so that the server, the mapper, the controllers and the tests can all import it.
package contract
