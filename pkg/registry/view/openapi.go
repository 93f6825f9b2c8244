package view

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// OpenAPI is the source's OpenAPI, which views serve for the resources they serve
// (viewOpenAPI). *source.Source implements it.
type OpenAPI interface {
	// OpenAPIV3 returns the client of the source's /openapi/v3 index and documents.
	OpenAPIV3() openapi.Client
	// OpenAPIV2 returns the source's /openapi/v2 document as JSON.
	OpenAPIV2(ctx context.Context) ([]byte, error)
}

var _ OpenAPI = (*source.Source)(nil)

// openAPICheckInterval is how often, at most, a view's OpenAPI request makes the server look
// whether the source's documents changed (one request for the /openapi/v3 index; the v2
// document is read again).
const openAPICheckInterval = 5 * time.Second

// viewOpenAPI serves /openapi/v2 and /openapi/v3 below a view's base URL, as kube-apiserver serves
// them at its root, so that kubectl validates (`--validate`, which asks the v3 documents whether
// the server validates fields itself) and explains (`kubectl explain`) against a view as against
// kube-apiserver. The documents are the source's, cut to what views serve:
//   - the group versions of the mirrored resources (core v1 always: views serve namespaces);
//   - of each, the paths of the mirrored resources, with the operations a view serves: get
//     (get, list, watch) on the resource and its legacy watch paths, get, put and patch on
//     /status; other operations and subresources are left out, and of namespaces get only (a
//     view lists its namespaces, it does not watch them). The schemas are the source's.
//
// The content is the same for every location, as discovery's (viewDiscovery), so one set of
// documents serves every view; the paths are relative to the view's base URL. The v3 index
// names each document by /openapi/v3/<group version>?hash=<its ETag>, as kube-apiserver does;
// client-go (kubectl) puts the view's base path before a URL that starts with /openapi/v3. The
// documents are kube-openapi's handlers' (handler3 and handler: ETags, protobuf, the immutable
// hash URLs), rebuilt from the source when a request finds the mirrored resources changed, or
// the source's index changed and the last look is older than openAPICheckInterval.
type viewOpenAPI struct {
	resources resourceLister
	source    OpenAPI

	v3 *handler3.OpenAPIService
	v2 *handler.OpenAPIService
	// v2Handler serves v2 at /openapi/v2 (the handler registers itself on a mux).
	v2Handler http.Handler

	mu sync.Mutex
	// applied are the resources the documents were cut for; v3Hashes the source index's URL of
	// each group version served (its hash); v3Checked and v2Checked when the source was last read.
	applied              []source.ResourceInfo
	v3Hashes             map[string]string
	v3Checked, v2Checked time.Time
	v2Ready              bool
}

// newViewOpenAPI returns the OpenAPI of views over resources, from src.
func newViewOpenAPI(resources resourceLister, src OpenAPI) *viewOpenAPI {
	o := &viewOpenAPI{resources: resources, source: src, v3: handler3.NewOpenAPIService(), v3Hashes: map[string]string{}}
	o.v2 = handler.NewOpenAPIService(&spec.Swagger{})
	mux := http.NewServeMux()
	o.v2.RegisterOpenAPIVersionedService("/openapi/v2", mux)
	o.v2Handler = mux
	return o
}

// isOpenAPIPath reports whether path (inside a view) is one viewOpenAPI serves.
func isOpenAPIPath(path string) bool {
	return path == "/openapi/v2" || path == "/openapi/v3" || strings.HasPrefix(path, "/openapi/v3/")
}

// serve answers req for path, an OpenAPI path inside a view (isOpenAPIPath): GET only. A source
// whose OpenAPI cannot be read is a 503 until it can, unless earlier documents can be served.
func (o *viewOpenAPI) serve(w http.ResponseWriter, req *http.Request, path string, writeError func(error)) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		err := apierrors.NewMethodNotSupported(schema.GroupResource{}, req.Method)
		err.ErrStatus.Message = fmt.Sprintf("%s is an OpenAPI document of the view; it can only be read (GET), not %s", path, req.Method)
		writeError(err)
		return
	}
	inner := req.Clone(req.Context())
	inner.URL.Path, inner.URL.RawPath = path, ""
	if path == "/openapi/v2" {
		if err := o.refreshV2(req.Context()); err != nil {
			writeError(err)
			return
		}
		o.v2Handler.ServeHTTP(w, inner)
		return
	}
	if err := o.refreshV3(); err != nil {
		writeError(err)
		return
	}
	if path == "/openapi/v3" {
		o.v3.HandleDiscovery(w, inner)
		return
	}
	o.mu.Lock()
	_, served := o.v3Hashes[strings.TrimPrefix(path, "/openapi/v3/")]
	o.mu.Unlock()
	if !served {
		writeError(apierrors.NewNotFound(schema.GroupResource{}, path))
		return
	}
	o.v3.HandleGroupVersion(w, inner)
}

// refreshV3 brings the v3 documents in step with the mirrored resources and the source's.
func (o *viewOpenAPI) refreshV3() error {
	infos := o.resources.Resources()
	o.mu.Lock()
	defer o.mu.Unlock()
	same := sameDiscovery(infos, o.applied)
	if same && !o.v3Checked.IsZero() && time.Since(o.v3Checked) < openAPICheckInterval {
		return nil
	}
	paths, err := o.source.OpenAPIV3().Paths()
	if err != nil {
		return o.unavailable("v3", !o.v3Checked.IsZero(), err)
	}
	byGV := servedByGroupVersion(infos)
	for key := range o.v3Hashes {
		if _, ok := byGV[key]; !ok {
			o.v3.DeleteGroupVersion(key)
			delete(o.v3Hashes, key)
		}
	}
	for key, resources := range byGV {
		gv, ok := paths[key]
		if !ok {
			continue // the source does not describe it (yet)
		}
		hash := gv.ServerRelativeURL()
		if prev, ok := o.v3Hashes[key]; ok && prev == hash && same {
			continue
		}
		raw, err := gv.Schema("application/json")
		if err != nil {
			return o.unavailable("v3", !o.v3Checked.IsZero(), err)
		}
		doc := &spec3.OpenAPI{}
		if err := json.Unmarshal(raw, doc); err != nil {
			return apierrors.NewInternalError(fmt.Errorf("the source's OpenAPI v3 document of %s: %w", key, err))
		}
		if doc.Paths != nil {
			for p, item := range doc.Paths.Paths {
				if item == nil || !cutPathV3(p, &item.PathProps, resources) {
					delete(doc.Paths.Paths, p)
				}
			}
		}
		o.v3.UpdateGroupVersion(key, doc)
		o.v3Hashes[key] = hash
	}
	o.applied, o.v3Checked = infos, time.Now()
	return nil
}

// refreshV2 reads the source's v2 document again, cut to what views serve, when the last read
// is older than openAPICheckInterval or the mirrored resources changed.
func (o *viewOpenAPI) refreshV2(ctx context.Context) error {
	infos := o.resources.Resources()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.v2Ready && time.Since(o.v2Checked) < openAPICheckInterval && sameDiscovery(infos, o.applied) {
		return nil
	}
	raw, err := o.source.OpenAPIV2(ctx)
	if err != nil {
		return o.unavailable("v2", o.v2Ready, err)
	}
	doc := &spec.Swagger{}
	if err := json.Unmarshal(raw, doc); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("the source's OpenAPI v2 document: %w", err))
	}
	byGV := servedByGroupVersion(infos)
	if doc.Paths != nil {
		for p, item := range doc.Paths.Paths {
			key, rest, ok := splitGroupVersionPath(p)
			resources, served := byGV[key]
			if !ok || !served {
				delete(doc.Paths.Paths, p)
				continue
			}
			ops := servedOperations(rest, resources)
			if ops == (operations{}) {
				delete(doc.Paths.Paths, p)
				continue
			}
			props := item.PathItemProps
			item.PathItemProps = spec.PathItemProps{Parameters: props.Parameters}
			if ops.get {
				item.Get = props.Get
			}
			if ops.write {
				item.Put, item.Patch = props.Put, props.Patch
			}
			if item.Get == nil && item.Put == nil && item.Patch == nil {
				delete(doc.Paths.Paths, p)
				continue
			}
			doc.Paths.Paths[p] = item
		}
	}
	if err := o.v2.UpdateSpec(doc); err != nil {
		return apierrors.NewInternalError(err)
	}
	o.v2Ready, o.v2Checked = true, time.Now()
	return nil
}

// unavailable logs err, a failed read of the source's OpenAPI version, and returns nil when
// earlier documents can be served (have), else a 503 that says why.
func (o *viewOpenAPI) unavailable(version string, have bool, err error) error {
	if have {
		klog.InfoS("Reading the source's OpenAPI failed; serving the previous documents", "version", version, "err", contract.Truncate(err.Error(), 512))
		return nil
	}
	return apierrors.NewServiceUnavailable(fmt.Sprintf("the source's OpenAPI %s cannot be read: %s", version, contract.Truncate(err.Error(), 512)))
}

// servedByGroupVersion returns the resources views serve by the key of their group version in
// the OpenAPI v3 index ("api/v1", "apis/apps/v1"); core v1 always has namespaces.
func servedByGroupVersion(infos []source.ResourceInfo) map[string]map[string]bool {
	out := map[string]map[string]bool{"api/v1": {"namespaces": true}}
	for _, info := range infos {
		key := groupVersionKey(info.GVR.GroupVersion())
		if out[key] == nil {
			out[key] = map[string]bool{}
		}
		out[key][info.GVR.Resource] = true
	}
	return out
}

// groupVersionKey returns gv's key in the OpenAPI v3 index.
func groupVersionKey(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// splitGroupVersionPath splits an API path ("/apis/apps/v1/namespaces/{namespace}/deployments")
// into its group version's key and the rest ("namespaces/{namespace}/deployments").
func splitGroupVersionPath(p string) (key, rest string, ok bool) {
	segs := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 4)
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		return "api/" + segs[1], strings.Join(segs[2:], "/"), true
	case len(segs) >= 3 && segs[0] == "apis":
		return "apis/" + segs[1] + "/" + segs[2], strings.Join(segs[3:], "/"), true
	}
	return "", "", false
}

// operations says which operations of a path views serve: get, and put and patch (write).
type operations struct{ get, write bool }

// servedOperations returns the operations views serve of rest, a path below a group version
// (splitGroupVersionPath) whose served resources are resources: the group version's discovery
// ("") and every path of a served resource (its collections, objects and legacy watch paths)
// get; its /status get, put and patch; nothing else (other subresources; namespaces are listed
// and read, not watched).
func servedOperations(rest string, resources map[string]bool) operations {
	segs := strings.Split(strings.Trim(rest, "/"), "/")
	if len(segs) == 1 && segs[0] == "" {
		return operations{get: true}
	}
	watch := segs[0] == "watch"
	if watch {
		segs = segs[1:]
	}
	if len(segs) >= 3 && segs[0] == "namespaces" && segs[1] == "{namespace}" {
		segs = segs[2:]
	}
	if len(segs) == 0 || !resources[segs[0]] || len(segs) > 3 {
		return operations{}
	}
	if segs[0] == "namespaces" && len(segs) == 1 || segs[0] == "namespaces" && len(segs) == 2 && segs[1] == "{name}" {
		return operations{get: !watch}
	}
	switch {
	case segs[0] == "namespaces":
		return operations{}
	case len(segs) <= 2:
		return operations{get: true}
	case segs[2] == "status" && !watch:
		return operations{get: true, write: true}
	}
	return operations{}
}

// cutPathV3 keeps of props, the operations of the v3 path p, those views serve (servedOperations)
// and reports whether any is left.
func cutPathV3(p string, props *spec3.PathProps, resources map[string]bool) bool {
	_, rest, ok := splitGroupVersionPath(p)
	if !ok {
		return false
	}
	ops := servedOperations(rest, resources)
	kept := spec3.PathProps{Summary: props.Summary, Description: props.Description, Servers: props.Servers, Parameters: props.Parameters}
	if ops.get {
		kept.Get = props.Get
	}
	if ops.write {
		kept.Put, kept.Patch = props.Put, props.Patch
	}
	*props = kept
	return slices.ContainsFunc([]*spec3.Operation{kept.Get, kept.Put, kept.Patch}, func(op *spec3.Operation) bool { return op != nil })
}
