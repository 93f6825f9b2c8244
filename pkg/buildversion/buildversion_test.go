package buildversion

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/component-base/version"
)

func TestVersionFlagPrintsGitVersionFirst(t *testing.T) {
	ran := false
	cmd := &cobra.Command{Use: "mapper", RunE: func(*cobra.Command, []string) error { ran = true; return nil }}
	AddFlag(cmd)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("mapper --version: %v", err)
	}
	if ran {
		t.Error("--version ran the command; it must only print the version")
	}
	fields := strings.Fields(out.String())
	if len(fields) < 2 || fields[0] != "mapper" || fields[1] != version.Get().GitVersion {
		t.Errorf("mapper --version printed %q, want \"mapper %s (...)\"", out.String(), version.Get().GitVersion)
	}
	if !strings.Contains(out.String(), "commit "+version.Get().GitCommit) {
		t.Errorf("mapper --version printed %q, want the commit %q", out.String(), version.Get().GitCommit)
	}
}
