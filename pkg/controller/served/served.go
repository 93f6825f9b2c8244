// Package served answers which resources the source serves, for mapper-controller's
// controllers that are given resources by name at run time (Placements' spec.resources,
// DependencyRules and the references they return): a resource the source does not serve must
// be reported on the object naming it, never waited for.
package served

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DefaultRefresh is the least time between two re-reads of discovery that a question about an
// unknown resource causes.
const DefaultRefresh = 10 * time.Second

// Resolver answers from a RESTMapper over the source's discovery (a
// restmapper.DeferredDiscoveryRESTMapper). Asked about a resource it does not know, it resets
// a resettable mapper (meta.ResettableRESTMapper) so that discovery is read again, at most
// once per Refresh: a CRD installed later is found, and a misspelt resource named in every
// round does not make every round read discovery. Safe for concurrent use.
type Resolver struct {
	mapper meta.RESTMapper
	// Refresh is the least time between resets; New sets DefaultRefresh.
	Refresh time.Duration
	// Now is the clock; New sets time.Now.
	Now func() time.Time

	mu        sync.Mutex
	lastReset time.Time
}

// New returns a Resolver over mapper.
func New(mapper meta.RESTMapper) *Resolver {
	return &Resolver{mapper: mapper, Refresh: DefaultRefresh, Now: time.Now}
}

// NotServedError says that the source does not serve a resource under the name given.
type NotServedError struct {
	// Resource is the resource asked about.
	Resource schema.GroupVersionResource
	// Served is what the source serves under a similar name (a plural for a singular, the
	// preferred version for a group resource), when it serves one.
	Served *schema.GroupVersionResource
}

// Error implements error.
func (e *NotServedError) Error() string {
	name := e.Resource.GroupResource().String()
	if e.Resource.Version != "" {
		name += " (" + e.Resource.GroupVersion().String() + ")"
	}
	msg := "the source does not serve " + name
	if e.Served != nil {
		msg += fmt.Sprintf("; it serves %s (%s): resources are named in the plural, lowercase", e.Served.GroupResource(), e.Served.GroupVersion())
	}
	return msg
}

// IsNotServed reports whether err is (or wraps) a NotServedError.
func IsNotServed(err error) bool {
	var ns *NotServedError
	return errors.As(err, &ns)
}

// Kind returns the kind of gvr. It returns a *NotServedError when the source does not serve
// gvr under exactly this group, version and resource (a singular such as "deployment" is
// refused, with the plural it serves named), and the RESTMapper's error when discovery
// cannot be read.
func (r *Resolver) Kind(gvr schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	var gvk schema.GroupVersionKind
	err := r.retry(func() error {
		got, err := r.mapper.ResourceFor(gvr)
		if err != nil {
			return err
		}
		if got != gvr {
			return &NotServedError{Resource: gvr, Served: &got}
		}
		gvk, err = r.mapper.KindFor(gvr)
		return err
	})
	if meta.IsNoMatchError(err) {
		return gvk, &NotServedError{Resource: gvr}
	}
	return gvk, err
}

// Resource returns the version of gr that the source prefers. It returns a *NotServedError
// when the source does not serve gr by exactly this name, and the RESTMapper's error when
// discovery cannot be read.
func (r *Resolver) Resource(gr schema.GroupResource) (schema.GroupVersionResource, error) {
	var gvr schema.GroupVersionResource
	asked := gr.WithVersion("")
	err := r.retry(func() error {
		got, err := r.mapper.ResourceFor(asked)
		if err != nil {
			return err
		}
		if got.GroupResource() != gr {
			return &NotServedError{Resource: asked, Served: &got}
		}
		gvr = got
		return nil
	})
	if meta.IsNoMatchError(err) {
		return gvr, &NotServedError{Resource: asked}
	}
	return gvr, err
}

// retry runs ask, and once more after a reset of the RESTMapper when it failed to find the
// resource and the last reset is at least Refresh ago.
func (r *Resolver) retry(ask func() error) error {
	err := ask()
	if err == nil || !(meta.IsNoMatchError(err) || IsNotServed(err)) {
		return err
	}
	resettable, ok := r.mapper.(meta.ResettableRESTMapper)
	if !ok {
		return err
	}
	r.mu.Lock()
	now := r.Now()
	due := r.lastReset.IsZero() || now.Sub(r.lastReset) >= r.Refresh
	if due {
		r.lastReset = now
	}
	r.mu.Unlock()
	if !due {
		return err
	}
	resettable.Reset()
	return ask()
}
