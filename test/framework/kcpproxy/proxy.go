package kcpproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// Proxy serves kcp's /clusters/... URL space from a backing kube-apiserver (see the package
// documentation for the layout and the limits). It is an http.Handler; [Start] serves one on a
// loopback port.
type Proxy struct {
	backend *url.URL
	client  *http.Client
	scopes  *scopeCache
	infos   *request.RequestInfoFactory
}

// New returns a Proxy in front of the kube-apiserver of backing, which it uses (identity
// included) for every request it forwards. It fails when backing's host is not a URL or its
// transport cannot be built.
func New(backing *rest.Config) (*Proxy, error) {
	u, err := url.Parse(backing.Host)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("the backing server %q is not a URL", backing.Host)
	}
	hc, err := rest.HTTPClientFor(backing)
	if err != nil {
		return nil, err
	}
	scopes, err := newScopeCache(backing, hc)
	if err != nil {
		return nil, err
	}
	return &Proxy{
		backend: u,
		client:  hc,
		scopes:  scopes,
		infos:   newRequestInfoFactory(),
	}, nil
}

// newRequestInfoFactory returns kube-apiserver's own parser of resource paths.
func newRequestInfoFactory() *request.RequestInfoFactory {
	return &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
}

// clustersPrefix starts every path the proxy serves.
const clustersPrefix = "/" + contract.ClustersSegment + "/"

// splitClusterPath splits /clusters/<cluster>/<rest> into the cluster and /<rest>.
func splitClusterPath(p string) (cluster, rest string, ok bool) {
	after, found := strings.CutPrefix(p, clustersPrefix)
	if !found {
		return "", "", false
	}
	cluster, rest, _ = strings.Cut(after, "/")
	return cluster, "/" + rest, cluster != ""
}

// ServeHTTP serves /clusters/<cluster>/... and /clusters/*/...; any other path is a 404.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cluster, rest, ok := splitClusterPath(r.URL.Path)
	if !ok {
		writeStatus(w, newStatusError(http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("kcpproxy serves %s<cluster>/... and %s%s/... only, not %q", clustersPrefix, clustersPrefix, Wildcard, r.URL.Path)))
		return
	}
	if cluster != Wildcard {
		if err := ValidateClusterName(cluster); err != nil {
			writeStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
	}
	inner := r.Clone(r.Context())
	inner.URL.Path, inner.URL.RawPath = rest, ""
	info, err := p.infos.NewRequestInfo(inner)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	if !info.IsResourceRequest {
		p.passThrough(w, inner)
		return
	}
	p.serveResource(w, inner, cluster, info)
}

// passThrough forwards a non-resource request (discovery, /version, /openapi) unchanged: the
// backing server's APIs are every logical cluster's.
func (p *Proxy) passThrough(w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.backendURL(r.URL.Path, r.URL.RawQuery), r.Body)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	copyHeader(req.Header, r.Header, "Accept", "Content-Type")
	resp, err := p.client.Do(req)
	if err != nil {
		writeStatus(w, newStatusError(http.StatusBadGateway, metav1.StatusReasonServiceUnavailable, err.Error()))
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// serveResource forwards a resource request to the backing server in its terms and rewrites
// the answer back (package documentation).
func (p *Proxy) serveResource(w http.ResponseWriter, r *http.Request, cluster string, info *request.RequestInfo) {
	gvr := schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}
	s := scope{cluster: cluster, namespace: info.Namespace, namespaces: info.APIGroup == "" && info.Resource == "namespaces", gr: gvr.GroupResource()}
	if cluster == Wildcard && info.Verb != "list" && info.Verb != "watch" {
		err := apierrors.NewMethodNotSupported(s.gr, info.Verb)
		err.ErrStatus.Message = fmt.Sprintf("the wildcard endpoint %s%s serves list and watch only; %s of %s needs %s<cluster>", clustersPrefix, Wildcard, info.Verb, s.gr, clustersPrefix)
		writeStatus(w, err)
		return
	}
	if !s.namespaces && info.Namespace == "" {
		if namespaced, known := p.scopes.namespaced(gvr); known && !namespaced {
			writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("kcpproxy does not emulate the cluster-scoped resource %s (namespaces only)", s.gr)))
			return
		}
		if info.Verb == "deletecollection" {
			writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("kcpproxy does not emulate deletecollection of %s across namespaces; name the namespace", s.gr)))
			return
		}
	}
	path, err := backingPath(r.URL.Path, info, s)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	q := r.URL.Query()
	if err := s.fieldSelectorToBacking(q); err != nil {
		writeStatus(w, err)
		return
	}
	body, err := requestBodyToBacking(r, info.Verb, s)
	if err != nil {
		writeStatus(w, err)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.backendURL(path, q.Encode()), body)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	copyHeader(req.Header, r.Header, "Content-Type")
	// Only JSON can be rewritten: no protobuf, no Table.
	req.Header.Set("Accept", jsonAccept(r.Header.Get("Accept")))
	resp, err := p.client.Do(req)
	if err != nil {
		writeStatus(w, newStatusError(http.StatusBadGateway, metav1.StatusReasonServiceUnavailable, err.Error()))
		return
	}
	defer resp.Body.Close()
	if info.Verb == "watch" && resp.StatusCode == http.StatusOK {
		streamWatch(w, resp, s)
		return
	}
	writeResponse(w, resp, s)
}

// backendURL is the backing server's URL of path and the encoded query.
func (p *Proxy) backendURL(path, query string) string {
	u := *p.backend
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = query
	return u.String()
}

// backingPath returns the backing server's path of the cluster path p (without /clusters/c):
// the namespace segment (namespaces/<ns>) names the backing namespace; on the wildcard
// endpoint it is removed (the answer is filtered by namespace instead).
func backingPath(p string, info *request.RequestInfo, s scope) (string, error) {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	i := 2 // api/<version>
	if info.APIPrefix != "api" {
		i = 3 // apis/<group>/<version>
	}
	if i < len(segs) && (segs[i] == "watch" || segs[i] == "proxy") {
		i++
	}
	if i+1 < len(segs) && segs[i] == "namespaces" {
		if s.cluster == Wildcard {
			drop := i
			if s.namespaces {
				drop = i + 1 // keep "namespaces", drop the name
			}
			segs = append(segs[:drop], segs[i+2:]...)
		} else {
			b, err := BackingNamespace(s.cluster, segs[i+1])
			if err != nil {
				return "", err
			}
			segs[i+1] = b
		}
	}
	return "/" + strings.Join(segs, "/"), nil
}

// requestBodyToBacking returns the body to forward: for create, update and patch the object or
// patch rewritten by scope.toBacking (jsonPatchToBacking for JSON patches; apply patches are
// forwarded as JSON, which is YAML), any other body unchanged. A body that is not JSON (or
// YAML for apply) is a 415.
func requestBodyToBacking(r *http.Request, verb string, s scope) (io.Reader, error) {
	if r.Body == nil || (verb != "create" && verb != "update" && verb != "patch") {
		return r.Body, nil
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mediaType {
	case "application/json", string(types.MergePatchType), string(types.StrategicMergePatchType), string(types.JSONPatchType):
	case string(types.ApplyYAMLPatchType):
		if raw, err = yaml.YAMLToJSON(raw); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	default:
		return nil, newStatusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			fmt.Sprintf("kcpproxy rewrites JSON bodies only, not %q", r.Header.Get("Content-Type")))
	}
	var v interface{}
	if err := decodeJSON(raw, &v); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	switch body := v.(type) {
	case map[string]interface{}:
		if err := s.toBacking(body); err != nil {
			return nil, err
		}
	case []interface{}:
		if mediaType != string(types.JSONPatchType) {
			break
		}
		if v, err = s.jsonPatchToBacking(body); err != nil {
			return nil, err
		}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return bytes.NewReader(out), nil
}

// writeResponse writes the backing server's (non-watch) answer, rewritten by
// scope.responseFromBacking when it is JSON.
func writeResponse(w http.ResponseWriter, resp *http.Response, s scope) {
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		writeStatus(w, newStatusError(http.StatusBadGateway, metav1.StatusReasonServiceUnavailable, err.Error()))
		return
	}
	var obj map[string]interface{}
	if decodeJSON(raw, &obj) == nil && obj != nil {
		s.responseFromBacking(obj)
		if out, err := json.Marshal(obj); err == nil {
			raw = out
		}
	}
	copyResponseHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(raw)
}

// streamWatch copies a JSON watch stream frame by frame, each rewritten (or dropped) by
// scope.watchEventFromBacking and flushed at once. It returns when either side ends.
func streamWatch(w http.ResponseWriter, resp *http.Response, s scope) {
	copyResponseHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	enc := json.NewEncoder(w)
	for {
		var ev watchEvent
		if err := dec.Decode(&ev); err != nil {
			return
		}
		if !s.watchEventFromBacking(&ev) {
			continue
		}
		if err := enc.Encode(&ev); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// decodeJSON decodes raw into v keeping numbers exact (json.Number), so that integers of any
// size survive the round trip.
func decodeJSON(raw []byte, v interface{}) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

// copyHeader copies the named headers from src to dst.
func copyHeader(dst, src http.Header, names ...string) {
	for _, n := range names {
		if v := src.Values(n); len(v) > 0 {
			dst[http.CanonicalHeaderKey(n)] = v
		}
	}
}

// copyResponseHeader copies a backing response's headers except those of the body's framing,
// which change when the body is rewritten.
func copyResponseHeader(dst, src http.Header) {
	for k, v := range src {
		if k == "Content-Length" || k == "Content-Encoding" {
			continue
		}
		dst[k] = v
	}
}

// newStatusError returns a StatusError of code and reason with message.
func newStatusError(code int32, reason metav1.StatusReason, message string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: message}}
}

// writeStatus writes err as a Kubernetes Status (JSON) with its code; an error that is not an
// APIStatus is a 500.
func writeStatus(w http.ResponseWriter, err error) {
	var status metav1.Status
	if se, ok := err.(apierrors.APIStatus); ok {
		status = se.Status()
	} else {
		status = apierrors.NewInternalError(err).ErrStatus
	}
	status.Kind, status.APIVersion = "Status", "v1"
	out, _ := json.Marshal(status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(status.Code))
	_, _ = w.Write(out)
}

// jsonAccept returns the Accept header forwarded for a resource request whose client accepts
// accept: its JSON media ranges asking for metadata only (as=PartialObjectMetadata or
// PartialObjectMetadataList, as client-go's metadata client asks), which the proxy rewrites like
// any JSON object, then plain JSON; every other media range (protobuf, Table) is dropped.
func jsonAccept(accept string) string {
	var kept []string
	for _, r := range strings.Split(accept, ",") {
		mediaType, params, err := mime.ParseMediaType(strings.TrimSpace(r))
		if err != nil || mediaType != "application/json" {
			continue
		}
		if as := params["as"]; (as == "PartialObjectMetadata" || as == "PartialObjectMetadataList") && params["g"] == "meta.k8s.io" {
			kept = append(kept, strings.TrimSpace(r))
		}
	}
	return strings.Join(append(kept, "application/json"), ",")
}
