package view

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/validation"
)

// REST is the storage of the `locations/proxy` subresource: a rest.Connecter whose sub-path is
// the path inside the view (like pods/proxy), so that
// /apis/mapper.kcp.io/v1alpha1/locations/<location>/proxy/<path...> reaches Views.ServeView
// after the generic filters authenticated and authorized the outer request.
type REST struct {
	views *Views
}

var _ rest.Connecter = &REST{}

// NewREST returns the locations/proxy storage serving views.
func NewREST(views *Views) *REST { return &REST{views: views} }

// New returns the connect options object (the storage has no objects of its own).
func (r *REST) New() runtime.Object { return &mapper.LocationViewOptions{} }

// Destroy releases nothing.
func (r *REST) Destroy() {}

// ConnectMethods lists every HTTP method, so that writes reach the view and get its clear 405
// (or, for status, the write-back path) rather than a generic one.
func (r *REST) ConnectMethods() []string {
	return []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
}

// NewConnectOptions returns the options with the sub-path in "path".
func (r *REST) NewConnectOptions() (runtime.Object, bool, string) {
	return &mapper.LocationViewOptions{}, true, "path"
}

// Connect returns the handler of the view of location name. A name that is not a DNS-1123
// label is 404 with a message saying why (docs/design.md: location names are DNS-1123 labels).
func (r *REST) Connect(_ context.Context, name string, opts runtime.Object, _ rest.Responder) (http.Handler, error) {
	if errs := validation.ValidateLocationName(name); len(errs) > 0 {
		err := apierrors.NewNotFound(mapper.Resource("locations"), name)
		err.ErrStatus.Message = fmt.Sprintf("there is no location %q: a location name must be a DNS-1123 label (%s)", name, strings.Join(errs, "; "))
		return nil, err
	}
	o, ok := opts.(*mapper.LocationViewOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unexpected options %T", opts))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.views.ServeView(w, req, name, o.Path)
	}), nil
}
