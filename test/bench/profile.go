package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Profile is a pprof profile of a server, captured from its /debug/pprof endpoint during a
// measurement window, with a summary made by `go tool pprof`.
type Profile struct {
	// Name identifies the profile; File is its path relative to the output directory.
	Name    string `json:"name"`
	Process string `json:"process"`
	Kind    string `json:"kind"` // "cpu" or "heap"
	File    string `json:"file"`
	// Window says which measurement the profile covers.
	Window string `json:"window"`
	// Total is pprof's header line (duration and total samples).
	Total string `json:"total"`
	// Categories attribute every CPU sample to one kind of work (see categories); they sum to
	// the total.
	Categories []Category `json:"categories,omitempty"`
	// Top is `go tool pprof -top` (CPU, by flat time) or `-top -sample_index=inuse_space` (heap).
	Top string `json:"top"`
	Err string `json:"error,omitempty"`
}

// Category is the share of CPU samples whose stack matches a pattern.
type Category struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Share   float64 `json:"share"`
}

// categories of CPU work in priority order. A sample is attributed to the first category that
// matches any function of its stack (so a TLS write inside HTTP/2 serving counts as TLS, an
// allocation inside JSON decoding as JSON decoding); samples matching none are "other".
var categories = []category{
	{name: "syscalls and network poller", re: regexp.MustCompile(`^syscall\.|^internal/poll\.|^runtime\.netpoll|^internal/runtime/syscall`)},
	{name: "garbage collection", re: regexp.MustCompile(`^runtime\.(gcBgMarkWorker|gcAssistAlloc|bgsweep|bgscavenge|gcDrain)`)},
	{name: "JSON decoding", re: regexp.MustCompile(`^encoding/json\.(Unmarshal|\(\*decodeState\)|\(\*Decoder\)\.Decode)|^sigs\.k8s\.io/json|UnmarshalJSON$|^github\.com/json-iterator/go\.(\(\*Iterator\)|\w+Decoder)|^k8s\.io/apimachinery/pkg/runtime/serializer/json\.\(\*Serializer\)\.Decode`)},
	{name: "JSON encoding", re: regexp.MustCompile(`^encoding/json\.(Marshal|\(\*encodeState\)|\w+Encoder\.encode|\(\*\w+Encoder\)\.encode|compact|appendCompact|appendString|appendHTMLEscape)|^github\.com/json-iterator/go\.(\(\*Stream\)|\w+Encoder)|^k8s\.io/apimachinery/pkg/apis/meta/v1/unstructured\.\(\*Unstructured\)\.MarshalJSON`)},
	{name: "protobuf", re: regexp.MustCompile(`protobuf|\)\.(Unmarshal|MarshalToSizedBuffer)$`)},
	{name: "TLS (crypto/*)", re: regexp.MustCompile(`^crypto/`)},
	{name: "HTTP/2 and net/http (framing, writes, reads)", re: regexp.MustCompile(`^net/http\.|^golang\.org/x/net/http2`),
		// The roots of every handler goroutine are not HTTP work.
		not: regexp.MustCompile(`runHandler|ServeHTTP|HandlerFunc|\(\*conn\)\.serve$|\(\*Server\)\.Serve`)},
	{name: "goroutine scheduling and channels", re: regexp.MustCompile(`^runtime\.(schedule|findRunnable|park_m|mcall|goready|ready|wakep|startm|stopm|gopark|selectgo|chansend|chanrecv|send|recv|sellock|selunlock)$`)},
	{name: "label selector matching", re: regexp.MustCompile(`^k8s\.io/apimachinery/pkg/labels\.`)},
	{name: "pkg/cache (index, history, fan-out)", re: regexp.MustCompile(`cluster-mapper/pkg/cache\.`)},
	{name: "kube-apiserver watch cache (cacher)", re: regexp.MustCompile(`^k8s\.io/apiserver/pkg/storage/cacher`)},
	{name: "etcd client and storage", re: regexp.MustCompile(`^go\.etcd\.io/|^k8s\.io/apiserver/pkg/storage/etcd3`)},
	{name: "client-go reflector (source watch)", re: regexp.MustCompile(`^k8s\.io/client-go/tools/cache\.|^k8s\.io/client-go/rest/watch`)},
	{name: "memory allocation", re: regexp.MustCompile(`^runtime\.mallocgc`)},
	{name: "watch serving (apiserver handlers)", re: regexp.MustCompile(`^k8s\.io/apiserver/pkg/endpoints/handlers\.(\(\*WatchServer\)|serveWatch)|watchEncoder`)},
	{name: "list/watch request handling (handlers.ListResource, views)", re: regexp.MustCompile(`^k8s\.io/apiserver/pkg/endpoints/handlers\.|cluster-mapper/pkg/registry/view\.`)},
	{name: "request filters (authn, authz, flow control, audit)", re: regexp.MustCompile(`^k8s\.io/apiserver/pkg/(endpoints/filters|server/filters|authentication|authorization)|cluster-mapper/pkg/authorizer`)},
}

// category is one kind of CPU work: a sample's stack frame belongs to it when re matches the
// function name and not (if set) does not.
type category struct {
	name string
	re   *regexp.Regexp
	not  *regexp.Regexp
}

func (c category) matches(fn string) bool {
	return c.re.MatchString(fn) && (c.not == nil || !c.not.MatchString(fn))
}

// profileTarget is a server that serves /debug/pprof.
type profileTarget struct {
	process string
	base    string
	client  *http.Client
}

func (e *env) kaTarget() profileTarget {
	return profileTarget{process: "kube-apiserver", base: e.source.URL, client: e.kaHTTP}
}

func (e *env) maTarget() profileTarget {
	return profileTarget{process: "mapper-apiserver", base: e.mapper.URL, client: e.maHTTP}
}

// startCPUProfile starts a CPU profile of target over the next seconds seconds; the returned
// function waits for it and summarises it. With profiles disabled it returns nil profiles.
func (e *env) startCPUProfile(ctx context.Context, target profileTarget, name, window string, seconds int) func() *Profile {
	if !e.cfg.Profiles {
		return func() *Profile { return nil }
	}
	seconds = max(seconds, 1)
	ch := make(chan *Profile, 1)
	go func() {
		ch <- e.fetchProfile(ctx, target, name, window, "cpu", fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds))
	}()
	return func() *Profile { return <-ch }
}

// heapProfile captures a heap profile after a forced garbage collection (gc=1).
func (e *env) heapProfile(ctx context.Context, target profileTarget, name, window string) *Profile {
	if !e.cfg.Profiles {
		return nil
	}
	return e.fetchProfile(ctx, target, name, window, "heap", "/debug/pprof/heap?gc=1")
}

// forceGC asks the server for a heap profile with gc=1, which runs a garbage collection first;
// the profile itself is discarded.
func forceGC(ctx context.Context, target profileTarget) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.base+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := target.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s /debug/pprof/heap: %s (is profiling enabled?)", target.process, resp.Status)
	}
	return nil
}

func (e *env) fetchProfile(ctx context.Context, target profileTarget, name, window, kind, path string) *Profile {
	p := &Profile{Name: name, Process: target.process, Kind: kind, Window: window}
	rel := filepath.Join("profiles", name+".pb.gz")
	p.File = rel
	abs := filepath.Join(e.profDir, name+".pb.gz")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.base+path, nil)
	if err != nil {
		p.Err = err.Error()
		return p
	}
	resp, err := target.client.Do(req)
	if err != nil {
		p.Err = err.Error()
		return p
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		p.Err = fmt.Sprintf("GET %s: %s %v: %.200s", path, resp.Status, err, body)
		return p
	}
	if err := os.WriteFile(abs, body, 0o644); err != nil {
		p.Err = err.Error()
		return p
	}
	summarizeProfile(p, abs)
	return p
}

// summarizeProfile fills Total, Top and Categories with `go tool pprof`.
func summarizeProfile(p *Profile, file string) {
	args := []string{"tool", "pprof", "-top", "-nodecount=25"}
	if p.Kind == "heap" {
		args = []string{"tool", "pprof", "-top", "-sample_index=inuse_space", "-nodecount=20"}
	}
	out, err := exec.Command("go", append(args, file)...).CombinedOutput()
	if err != nil {
		p.Err = fmt.Sprintf("go tool pprof: %v: %.300s", err, out)
		return
	}
	p.Top, p.Total = trimPprofHeader(string(out))
	if p.Kind != "cpu" {
		return
	}
	out, err = exec.Command("go", "tool", "pprof", "-traces", file).Output()
	if err != nil {
		p.Err = fmt.Sprintf("go tool pprof -traces: %v", err)
		return
	}
	p.Categories = categorize(out)
}

// trimPprofHeader drops the File/Build ID/Time lines of pprof's output and returns the rest
// and the "Duration: ..." line.
func trimPprofHeader(s string) (string, string) {
	var keep []string
	total := ""
	for _, l := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(l, "File:"), strings.HasPrefix(l, "Build ID:"), strings.HasPrefix(l, "Time:"), strings.HasPrefix(l, "Type:"):
		case strings.HasPrefix(l, "Duration:"):
			total = strings.TrimSpace(l)
		default:
			keep = append(keep, l)
		}
	}
	return strings.TrimRight(strings.Join(keep, "\n"), "\n") + "\n", total
}

// categorize parses `go tool pprof -traces` of a CPU profile and attributes every sample to
// the first category (in priority order) matching a function of its stack, or to "other".
func categorize(traces []byte) []Category {
	sums := make([]float64, len(categories)+1)
	total := 0.0
	var value float64
	var matched []bool
	flush := func() {
		if matched == nil || value < 0 {
			matched = nil
			return
		}
		total += value
		best := len(categories)
		for i, m := range matched {
			if m {
				best = i
				break
			}
		}
		sums[best] += value
		matched = nil
	}
	sc := bufio.NewScanner(bytes.NewReader(traces))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	inBody := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			inBody = true
			matched = make([]bool, len(categories))
			value = -1
			continue
		}
		if !inBody || strings.TrimSpace(line) == "" {
			continue
		}
		fn := ""
		if value < 0 {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			d, err := time.ParseDuration(f[0])
			if err != nil {
				continue
			}
			value = d.Seconds()
			fn = f[1]
		} else {
			fn = strings.Fields(line)[0]
		}
		for i, c := range categories {
			if !matched[i] && c.matches(fn) {
				matched[i] = true
			}
		}
	}
	flush()
	var out []Category
	for i, sum := range sums {
		if sum == 0 || total == 0 {
			continue
		}
		name := "other"
		if i < len(categories) {
			name = categories[i].name
		}
		out = append(out, Category{Name: name, Seconds: sum, Share: sum / total})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seconds > out[j].Seconds })
	return out
}

// categorySeconds returns the CPU seconds a profile attributes to the named category.
func categorySeconds(p *Profile, name string) float64 {
	if p == nil {
		return 0
	}
	for _, c := range p.Categories {
		if c.Name == name {
			return c.Seconds
		}
	}
	return 0
}

// Markdown renders the profile for the report.
func (p *Profile) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Profile `%s`** — %s %s profile, %s (`%s`).", p.Name, p.Process, p.Kind, p.Window, p.File)
	if p.Err != "" {
		fmt.Fprintf(&b, " Could not be captured: %s\n", p.Err)
		return b.String()
	}
	fmt.Fprintf(&b, " %s\n\n", p.Total)
	if len(p.Categories) > 0 {
		b.WriteString("| work (each sample counted once, by the first matching kind in the order of profile.go) | CPU s | share |\n|---|---|---|\n")
		for _, c := range p.Categories {
			fmt.Fprintf(&b, "| %s | %.2f | %.0f%% |\n", c.Name, c.Seconds, c.Share*100)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "<details><summary>go tool pprof -top%s</summary>\n\n```\n%s```\n</details>\n", map[bool]string{true: "", false: " -sample_index=inuse_space"}[p.Kind == "cpu"], p.Top)
	return b.String()
}
