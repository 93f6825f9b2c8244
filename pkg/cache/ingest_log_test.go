package cache

import (
	"strings"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// captureKlog sends klog's global output to a buffer for the rest of the test.
func captureKlog(t *testing.T) *framework.SyncBuffer {
	t.Helper()
	out := &framework.SyncBuffer{}
	klog.SetLoggerWithOptions(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(out), textlogger.Verbosity(10))))
	t.Cleanup(klog.ClearLogger)
	return out
}

// TestMalformedAnnotationLogIsBounded: a malformed assignment whose bad entry
// is 200 KB must not become a 200 KB log line (one per object version).
func TestMalformedAnnotationLogIsBounded(t *testing.T) {
	const huge = 200 << 10
	const maxLine = 2048
	out := captureKlog(t)
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 1)
	bad := []string{
		`["` + strings.Repeat("a", huge) + `"]`,                                      // an entry that is no location name
		`["east","` + strings.Repeat("Ä", huge/2) + `"]`,                             // multi-byte UTF-8
		`["east", ` + strings.Repeat("9", huge) + `]`,                                // an entry that is no string
		strings.Repeat("{", huge),                                                    // not JSON
		`{"` + strings.Repeat("k", huge) + `": "` + strings.Repeat("v", huge) + `"}`, // not an array
	}
	for i, v := range bad {
		u := cm("ns", "a", uint64(2+i), nil, "a:"+contract.AssignedLocationsAnnotation+"="+v)
		u.SetAnnotations(map[string]string{contract.AssignedLocationsAnnotation: v, contract.ClusterAnnotation: strings.Repeat("c", huge)})
		mustAdd(t, s, u)
	}
	logged := out.String()
	lines := strings.Split(strings.TrimSpace(logged), "\n")
	n := 0
	for _, l := range lines {
		if !strings.Contains(l, "malformed location assignment") {
			continue
		}
		n++
		if len(l) > maxLine {
			t.Errorf("log line of %d bytes (at most %d): %.300s...", len(l), maxLine, l)
		}
	}
	if n != len(bad) {
		t.Fatalf("got %d log lines about malformed assignments, want %d; log:\n%.2000s", n, len(bad), logged)
	}
}
