package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// arrivals counts the objects that arrive on a target during scenario 6: the ADDED events of
// one watch per resource on the target's objects of a location (label kcp.io/location),
// opened before the mapper starts.
//
// A watch can end before the run does: kube-apiserver closes a watch whose consumer falls
// behind, and the response then just ends, as when the benchmark's process is starved on a
// loaded machine. Before, that watch's resource stopped counting, and a run in which the mapper
// had mapped every object in seconds reported fewer for the rest of the scenario. Here a watch
// that ended is opened again from the last resourceVersion it saw (events and bookmarks), so no
// arrival is missed or counted twice; when that resourceVersion is too old (410 Gone), the
// resource is counted by a LIST of the location's objects instead, once a second.
type arrivals struct {
	ctx context.Context
	// base is the target's URL; selector the label selector, query-escaped.
	base, selector string
	// open opens a watch of a URL; list GETs a URL and returns the body.
	open func(ctx context.Context, name, url string) (*watchStream, error)
	list func(ctx context.Context, url string) ([]byte, error)

	resources []*resourceArrivals
}

// resourceArrivals are the watches of one resource, the last one open (or ended).
type resourceArrivals struct {
	path    string
	streams []*watchStream
	// from is the resourceVersion the first watch started at.
	from uint64
	// listed is how many objects a LIST found, once the watches could not resume (-1 before);
	// listedAt when.
	listed   int
	listedAt time.Time
	// reopened counts the watches opened again after one ended.
	reopened int
}

// watch starts counting the arrivals of the resource at path (e.g. /api/v1/configmaps) from
// resourceVersion rv.
func (a *arrivals) watch(path string, rv uint64) error {
	r := &resourceArrivals{path: path, from: rv, listed: -1}
	w, err := a.open(a.ctx, path, a.watchURL(path, rv))
	if err != nil {
		return err
	}
	r.streams = append(r.streams, w)
	a.resources = append(a.resources, r)
	return nil
}

// watchURL is the URL of a watch of path's objects with the selector from rv, with bookmarks
// (they move the resourceVersion a watch resumes from).
func (a *arrivals) watchURL(path string, rv uint64) string {
	return fmt.Sprintf("%s%s?watch=true&allowWatchBookmarks=true&timeoutSeconds=3600&labelSelector=%s&resourceVersion=%d", a.base, path, a.selector, rv)
}

// count returns how many objects arrived so far and when the first did (zero when none or
// unknown), after resuming the watches that ended.
func (a *arrivals) count() (n int, first time.Time) {
	for _, r := range a.resources {
		a.resume(r)
		if r.listed >= 0 {
			n += r.listed
			continue
		}
		for _, w := range r.streams {
			for _, e := range w.received() {
				if e.typ != 'A' {
					continue
				}
				n++
				if first.IsZero() || e.at.Before(first) {
					first = e.at
				}
			}
		}
	}
	return n, first
}

// resume opens r's watch again when it ended (the server closed it), from the newest
// resourceVersion it saw, and counts r by LIST once a watch cannot resume (its last error is a
// watch error event, such as 410 Gone) or cannot be opened.
func (a *arrivals) resume(r *resourceArrivals) {
	if r.listed >= 0 {
		if time.Since(r.listedAt) >= time.Second {
			a.relist(r)
		}
		return
	}
	last := r.streams[len(r.streams)-1]
	select {
	case <-last.done:
	default:
		return // still open
	}
	if last.stopped.Load() || a.ctx.Err() != nil {
		return
	}
	if err := last.error(); err != nil && strings.HasPrefix(err.Error(), "watch error event") {
		a.relist(r)
		return
	}
	from := r.from
	for _, w := range r.streams {
		from = max(from, w.lastRV.Load())
	}
	w, err := a.open(a.ctx, r.path, a.watchURL(r.path, from))
	if err != nil {
		a.relist(r)
		return
	}
	r.streams = append(r.streams, w)
	r.reopened++
}

// relist counts r's objects with a LIST (listed stays as it was when the LIST fails).
func (a *arrivals) relist(r *resourceArrivals) {
	r.listedAt = time.Now()
	body, err := a.list(a.ctx, fmt.Sprintf("%s%s?labelSelector=%s", a.base, r.path, a.selector))
	if err != nil {
		return
	}
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if json.Unmarshal(body, &l) == nil {
		r.listed = len(l.Items)
	}
}

// reopened returns how many watches were opened again after the server ended one, and how
// many resources were counted by LIST.
func (a *arrivals) reopened() (watches, listed int) {
	for _, r := range a.resources {
		watches += r.reopened
		if r.listed >= 0 {
			listed++
		}
	}
	return watches, listed
}

// stop ends every watch.
func (a *arrivals) stop() {
	for _, r := range a.resources {
		for _, w := range r.streams {
			w.stop()
		}
	}
}

// getBody GETs url with c and returns the body of a 200, or an error.
func getBody(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, body)
	}
	return body, nil
}
