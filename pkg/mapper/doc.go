// Package mapper is the sync loop that keeps one target cluster equal to one location's view
// of mapper-apiserver (docs/design.md, invariants 1–4).
//
// A Mapper runs a client-go dynamic informer per resource on the view and feeds a
// rate-limited work queue; its workers turn each view object into an apply configuration
// (Transform, DropFields) and server-side apply it onto the target, or delete the target copy
// of an object that left the view (only after a consistent read through the view confirms it,
// and never an object without the mapper's label and source annotations). Informers on the
// managed target objects feed the status write-back through the view's /status subresource
// and restore copies deleted on the target. A periodic sweep deletes orphans; resources the
// target does not serve are halted until it does. Metrics are registered in component-base's
// legacy registry.
//
// The command line (flags, leader election, health endpoint) is in package app, the one-shot
// comparison behind `mapper verify` in package verify. docs/mapper.md describes both.
package mapper
