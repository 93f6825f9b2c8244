package view

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// TestSourceError: a 503 only for an unreachable or unavailable source.
func TestSourceError(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	cases := []struct {
		name string
		err  error
		code int32
	}{
		{"transport failure", errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), http.StatusServiceUnavailable},
		{"source 500", apierrors.NewInternalError(errors.New("etcd down")), http.StatusServiceUnavailable},
		{"source 429", apierrors.NewTooManyRequests("slow down", 1), http.StatusServiceUnavailable},
		{"source 403 to the server's identity", apierrors.NewForbidden(gr, "x", errors.New("no RBAC")), http.StatusInternalServerError},
		{"source 400", apierrors.NewBadRequest("bad"), http.StatusInternalServerError},
		{"the request's deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), http.StatusGatewayTimeout},
	}
	for _, c := range cases {
		var status apierrors.APIStatus
		if !errors.As(sourceError(c.err), &status) || status.Status().Code != c.code {
			t.Errorf("%s: %v, want code %d", c.name, sourceError(c.err), c.code)
		}
	}
}

// TestValidatePathSegments: kube-apiserver's answers for names and namespaces that are no path
// segment.
func TestValidatePathSegments(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	cases := []struct {
		namespace, name string
		code            int32 // 0: accepted
	}{
		{"default", "a%b", http.StatusBadRequest},
		{"default", "..", http.StatusBadRequest},
		{"a%b", "x", http.StatusNotFound},
		{"a%b", "", 0}, // a list: kube-apiserver answers an empty list
		{"default", "x", 0},
	}
	for _, c := range cases {
		err := validatePathSegments(&request.RequestInfo{Namespace: c.namespace, Name: c.name}, gr)
		var status apierrors.APIStatus
		switch {
		case c.code == 0 && err != nil:
			t.Errorf("%s/%s: %v, want accepted", c.namespace, c.name, err)
		case c.code != 0 && (!errors.As(err, &status) || status.Status().Code != c.code):
			t.Errorf("%s/%s: %v, want %d", c.namespace, c.name, err, c.code)
		}
	}
}
