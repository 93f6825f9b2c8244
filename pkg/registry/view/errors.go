package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// sourceError turns a failed source request into the Status a view answers. A 503 only ever
// means that the source could not be reached or is itself unavailable: a transport failure (no
// Status from the source), or the source answering 5xx or 429. The request's own context ending
// is answered as such (504 for its deadline), and the source refusing the server's own request
// (another 4xx) is a 500 that says so. Requests the source could never accept (a name that is no
// path segment) are refused before they are sent (validatePathSegments), so that a client-side
// error of the source client is not mistaken for an unreachable source.
func sourceError(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return apierrors.NewTimeoutError(fmt.Sprintf("the request's deadline passed while reading the source: %v", err), 1)
	case errors.Is(err, context.Canceled):
		return apierrors.NewInternalError(fmt.Errorf("the request was canceled while reading the source: %w", err))
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		code := status.Status().Code
		if code >= 500 || code == http.StatusTooManyRequests {
			return apierrors.NewServiceUnavailable(fmt.Sprintf("the source API server could not be read: %v", contract.Truncate(err.Error(), maxQuoted)))
		}
		return apierrors.NewInternalError(fmt.Errorf("the source API server refused mapper-apiserver's own request: %s", contract.Truncate(err.Error(), maxQuoted)))
	}
	return apierrors.NewServiceUnavailable(fmt.Sprintf("the source API server could not be reached: %v", contract.Truncate(err.Error(), maxQuoted)))
}

// validatePathSegments answers as kube-apiserver does for a name or namespace that cannot be a
// path segment ("." "..", or containing "/" or "%"), before anything reaches the source or the
// cache: a name is a 400 "Name parameter invalid" (k8s.io/apiserver's NamespaceKeyFunc); a
// namespace is not checked by kube-apiserver (a GET in it is a 404, a list is empty), so it is
// a 404 here for requests by name and is left to the (empty) list otherwise.
func validatePathSegments(info *request.RequestInfo, gr schema.GroupResource) error {
	if msgs := content.IsPathSegmentName(info.Namespace); len(msgs) != 0 && info.Name != "" {
		return apierrors.NewNotFound(gr, contract.Truncate(info.Name, 256))
	}
	if msgs := content.IsPathSegmentName(info.Name); len(msgs) != 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("Name parameter invalid: %q: %s", contract.Truncate(info.Name, 256), strings.Join(msgs, ";")))
	}
	return nil
}

// pathNotFound is the 404 of an inner path that is no Kubernetes API path: kube-apiserver's
// "the server could not find the requested resource", with the path and the reason.
func pathNotFound(innerPath string, reason error) error {
	msg := fmt.Sprintf("the server could not find the requested resource: %q is not an API path inside a location view", contract.Truncate(innerPath, 256))
	if reason != nil {
		msg += ": " + reason.Error()
	}
	err := apierrors.NewGenericServerResponse(http.StatusNotFound, "get", schema.GroupResource{}, "", msg, 0, false)
	err.ErrStatus.Message = msg
	return err
}

// strictPatchError turns the source's 400 strict decoding error of a status write made for a
// PATCH into kube-apiserver's answer to a strict PATCH: 422 with the error on the field
// "patch" (k8s.io/apiserver's patch handler). Other errors are returned unchanged.
func strictPatchError(ctx context.Context, err error, status interface{}) error {
	info, ok := request.RequestInfoFrom(ctx)
	if !ok || info.Verb != "patch" || !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "strict decoding error") {
		return err
	}
	raw, _ := json.Marshal(map[string]interface{}{"status": status})
	return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
		field.Invalid(field.NewPath("patch"), contract.Truncate(string(raw), 1024), statusMessage(err)),
	})
}

// statusMessage is the message of an API error.
func statusMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}
