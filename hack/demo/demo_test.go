package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestDemo runs the demo as `make demo` does, in temporary directories, and checks what it
// promises: the lines scripts read, both locations Ready with their mappers, the mirrored Service
// and Secret on the targets, the Customization rendered by a view, Deployments' status from the
// targets' kube-controller-manager written back to the source and summed, a StatusSummary,
// blog's application placed whole on one location, a deleted namespace going away in the source
// (its objects' copies deleted first, as the locations' finalizers require); then that Ctrl-C (SIGINT) stops every process it
// started and removes its temporary directory.
func TestDemo(t *testing.T) {
	framework.BinDir(t) // the testenv, as make demo builds it
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	tmp := filepath.Join(work, "tmp")
	kc := filepath.Join(work, "kubeconfigs")
	bin := filepath.Join(work, "bin")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	demo := filepath.Join(work, "demo")
	build := exec.Command("go", "build", "-o", demo, "./hack/demo")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./hack/demo: %v\n%s", err, out)
	}
	cmd := exec.Command(demo, "-dir", kc, "-bin-dir", bin)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// os/exec copies the demo's stderr from a goroutine of its own while the test reads it.
	var stderr framework.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 1024)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })

	var printed []string
	deadline := time.After(12 * time.Minute)
	for running := false; !running; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the demo ended before it ran: %v\nstdout:\n%s\nstderr:\n%s", <-exited, strings.Join(printed, "\n"), stderr.String())
			}
			printed = append(printed, l)
			running = strings.HasPrefix(l, "Press Ctrl-C")
		case <-deadline:
			t.Fatalf("the demo did not get running in 12 minutes\nstderr:\n%s", stderr.String())
		}
	}
	out := strings.Join(printed, "\n")
	for _, want := range []string{"cluster-mapper demo is running.", "  east's view:            https://", "  through the aggregator: https://",
		"  K=" + framework.KubectlPath(t), "--kubeconfig " + kc + "/east.kubeconfig", "mapper of east:", "mapper of west:",
		"mirrored resources:     configmaps, secrets, services, serviceaccounts, deployments.apps", "building " + bin + "/mapper", "export PATH=" + bin + ":$PATH", "mapper --kubeconfig " + kc + "/source.kubeconfig where deployment/frontend -n web"} {
		if !strings.Contains(out+"\n"+stderr.String(), want) {
			t.Errorf("the demo did not print %q:\n%s", want, out)
		}
	}

	ctx := context.Background()
	kubectl := func(kubeconfig string, args ...string) (string, error) {
		return framework.RunKubectl(t, filepath.Join(kc, kubeconfig), args...)
	}
	eventually := func(what string, f func() (bool, string)) {
		t.Helper()
		var last string
		if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
			ok, l := f()
			last = l
			return ok, nil
		}); err != nil {
			t.Errorf("%s: not within 3 minutes; last: %s", what, last)
		}
	}
	equals := func(want, kubeconfig string, args ...string) func() (bool, string) {
		return func() (bool, string) {
			got, err := kubectl(kubeconfig, args...)
			return err == nil && strings.TrimSpace(got) == want, fmt.Sprintf("%q %v", got, err)
		}
	}
	eventually("both locations Ready", equals("True True", "source.kubeconfig", "get", "synctargets", "-o",
		`jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status} {end}`))
	eventually("the Customization labels east's copy of web/frontend with east's region", equals("us-east", "east.kubeconfig",
		"get", "deployment", "frontend", "-n", "web", "-o", `jsonpath={.metadata.labels.demo\.example/region}`))
	eventually("the Service is mirrored onto east's target", equals("service/frontend", "target-east.kubeconfig",
		"get", "service", "frontend", "-n", "web", "-o", "name", "--ignore-not-found"))
	eventually("the Secret is mirrored onto east's target", equals("secret/checkout-credentials", "target-east.kubeconfig",
		"get", "secret", "checkout-credentials", "-n", "shop", "-o", "name", "--ignore-not-found"))
	eventually("web/frontend's status in the source is the sum of its 3 replicas over east and west", equals("3", "source.kubeconfig",
		"get", "deployment", "frontend", "-n", "web", "-o", "jsonpath={.status.replicas}"))
	eventually("the StatusSummary of replicas by region", equals("replicas-by-region", "source.kubeconfig",
		"get", "statussummaries", "-n", "web", "-o", "jsonpath={.items[*].metadata.name}"))
	eventually("the StatusCollector evaluates every row (Ready True)", equals("True", "source.kubeconfig",
		"get", "statuscollector", "replicas-by-region", "-n", "web", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`))
	eventually("blog's application on one location, whole (the Placement selects its Deployment, the rest follows)", func() (bool, string) {
		got, err := kubectl("source.kubeconfig", "get", "-n", "blog", "deployment/blog", "configmap/blog-config", "secret/blog-db",
			"serviceaccount/blog", "service/blog", "-o", `jsonpath={range .items[*]}{.metadata.annotations.kcp\.io/assigned-locations} {end}`)
		f := strings.Fields(got)
		ok := err == nil && len(f) == 5 && (f[0] == `["east"]` || f[0] == `["west"]`)
		for _, l := range f {
			ok = ok && l == f[0]
		}
		return ok, fmt.Sprintf("%q %v", got, err)
	})
	// docs/day2.md's first command after `make demo`: kubectl mapper, the plugin of bin/ found on
	// PATH, with its -o jsonpath (cli-runtime's printers).
	eventually("kubectl mapper locations lists east and west Ready", func() (bool, string) {
		// kubectl takes no flag before a plugin's name ("flags cannot be placed before plugin name").
		c := exec.Command(framework.KubectlPath(t), "mapper", "--kubeconfig="+filepath.Join(kc, "source.kubeconfig"), "locations",
			"-o", "jsonpath={range .items[*]}{.metadata.name}={.ready} {end}")
		c.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := c.CombinedOutput()
		return err == nil && strings.TrimSpace(string(out)) == "east=True west=True", fmt.Sprintf("%q %v", out, err)
	})
	// docs/mapper.md's command after `make demo`: bin/mapper verify with the demo's kubeconfigs.
	// It reports per invariant; 1, 2 and 4 hold. (Invariant 3 is left out here: verify compares
	// the raw .status, while the mapper writes observedGeneration back in view generations.)
	eventually("bin/mapper verify finds invariants 1, 2 and 4 held for east", func() (bool, string) {
		out, _ := exec.Command(filepath.Join(bin, "mapper"), "verify", "--view-kubeconfig="+filepath.Join(kc, "mapper-east.kubeconfig"),
			"--target-kubeconfig="+filepath.Join(kc, "target-east.kubeconfig")).CombinedOutput()
		for _, n := range []string{"1", "2", "4"} {
			if !regexp.MustCompile(`(?m)^invariant ` + n + ` \(.*\): 0 violations$`).Match(out) {
				return false, string(out)
			}
		}
		return true, ""
	})
	// The demo settles: web/frontend (divided over east and west, customized, its status the
	// sum of both) keeps one resourceVersion across a verify of both locations that finds every
	// invariant held, status included. A status write-back loop (a record write that moved the
	// customized view's generation, so the copy was stamped again and the status written
	// again, several writes a second) never lets it.
	eventually("web/frontend settles: one resourceVersion across a verify of east and west with every invariant held", func() (bool, string) {
		rv := func() string {
			out, _ := kubectl("source.kubeconfig", "get", "deployment", "frontend", "-n", "web", "-o", "jsonpath={.metadata.resourceVersion}")
			return strings.TrimSpace(out)
		}
		before := rv()
		for _, loc := range []string{"east", "west"} {
			out, _ := exec.Command(filepath.Join(bin, "mapper"), "verify", "--view-kubeconfig="+filepath.Join(kc, "mapper-"+loc+".kubeconfig"),
				"--target-kubeconfig="+filepath.Join(kc, "target-"+loc+".kubeconfig")).CombinedOutput()
			if !regexp.MustCompile(`(?m)^total: 0 violations$`).Match(out) {
				return false, loc + ": " + string(out)
			}
		}
		after := rv()
		return before != "" && before == after, fmt.Sprintf("resourceVersion %s, then %s", before, after)
	})
	if _, err := kubectl("source.kubeconfig", "delete", "namespace", "shop", "--wait=false"); err != nil {
		t.Error(err)
	}
	eventually("the deleted namespace shop goes away in the source", equals("", "source.kubeconfig", "get", "namespace", "shop", "--ignore-not-found", "-o", "name"))

	// Ctrl-C: everything stops, nothing stays behind.
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range lines {
		}
	}()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the demo exited with %v after Ctrl-C\n%s", err, stderr.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the demo did not stop within 3 minutes of Ctrl-C")
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("the demo left %s behind in its temporary directory", e.Name())
	}
	if procs := processesMentioning(work); len(procs) > 0 {
		t.Errorf("processes of the demo still run after Ctrl-C: %v", procs)
	}
}

// processesMentioning returns the command lines of live processes whose command line contains s
// (every process the demo starts names a file below its directories).
func processesMentioning(s string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		f, err := os.Open(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(f)
		f.Close()
		line := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(line, s) && e.Name() != fmt.Sprint(os.Getpid()) {
			out = append(out, e.Name()+": "+line)
		}
	}
	return out
}
