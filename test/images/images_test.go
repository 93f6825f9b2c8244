package images

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// testRepo is the repository prefix the test tags its images with, so that it never replaces the
// images of `make images` (cluster-mapper/...); they are removed when the test ends.
const testRepo = "localhost/cluster-mapper-test"

// TestImages builds every image with hack/images.sh save (what `make images-save` runs), then
// checks each image as a container runtime would see it, without running one: the entrypoint is
// the command's static binary, the user is 65532:65532, the OCI labels carry the version of
// hack/version-ldflags.sh, the revision and the source, and the binary taken out of the image's
// filesystem prints that same version with --version and its usage with --help.
func TestImages(t *testing.T) {
	builder := imageBuilder(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	version := hackOutput(t, root, "hack/version-ldflags.sh", "--version")
	commit := hackOutput(t, root, "hack/version-ldflags.sh", "--commit")
	out := t.TempDir()
	refs, err := Refs(root, testRepo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Remove(builder, refs); err != nil {
			t.Error(err)
		}
	})
	if _, err := Hack(root, out, testRepo, builder, "save"); err != nil {
		t.Fatal(err)
	}

	// One image per command hack/images.sh builds: every command of cmd/ but the kubectl plugins.
	for _, ref := range refs {
		name := path.Base(ref[:strings.LastIndex(ref, ":")])
		t.Run(name, func(t *testing.T) {
			tarball := filepath.Join(out, name+".tar")
			img, err := ReadArchive(tarball)
			if err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(tarball)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %.1f MB", filepath.Base(tarball), float64(st.Size())/1e6)

			entrypoint := "/usr/local/bin/" + name
			cfg := img.Config.Config
			if len(cfg.Entrypoint) != 1 || cfg.Entrypoint[0] != entrypoint {
				t.Errorf("entrypoint %q, want [%q]", cfg.Entrypoint, entrypoint)
			}
			if cfg.User != "65532:65532" {
				t.Errorf("user %q, want the non-root 65532:65532", cfg.User)
			}
			for k, want := range map[string]string{
				"org.opencontainers.image.version":  version,
				"org.opencontainers.image.revision": commit,
				"org.opencontainers.image.title":    name,
				"org.opencontainers.image.source":   "https://github.com/cluster-mapper/cluster-mapper",
			} {
				if got := cfg.Labels[k]; got != want {
					t.Errorf("label %s = %q, want %q", k, got, want)
				}
			}
			if files := img.RegularFiles(); len(files) != 1 || files[0] != strings.TrimPrefix(entrypoint, "/") {
				t.Errorf("the image holds the files %q, want the binary alone", files)
			}

			_, mode, err := img.File(entrypoint)
			if err != nil {
				t.Fatal(err)
			}
			if mode&0o005 != 0o005 {
				t.Errorf("%s has mode %v: user 65532 cannot run it", entrypoint, mode)
			}
			path, err := img.ExtractEntrypoint(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if err := checkStatic(path); err != nil {
				t.Error(err)
			}
			got, err := exec.Command(path, "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version: %v\n%s", name, err, got)
			}
			if f := strings.Fields(string(got)); len(f) < 2 || f[0] != name || f[1] != version {
				t.Errorf("%s --version printed %q, want %q first, as the image's version label", name, got, name+" "+version)
			}
			help, err := exec.Command(path, "--help").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --help: %v\n%s", name, err, help)
			}
			if !strings.Contains(string(help), "Usage:\n  "+name) {
				t.Errorf("%s --help printed no usage:\n%s", name, help)
			}
		})
	}
}

// checkStatic fails for a dynamically linked executable: an image FROM scratch has no loader and
// no libc.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (it names a program interpreter)", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("%s needs shared libraries %v", path, libs)
	}
	return nil
}

// noBuilderReason is the environment variable in which .ci/run says why it could not install
// buildah (no apt-get, no root, the mirror unreachable).
const noBuilderReason = "CLUSTER_MAPPER_NO_IMAGE_BUILDER"

// imageBuilder returns buildah or podman, whichever is on PATH. Without either the test is
// skipped with the way to install one; in CI (CI set) it fails, since .ci/run installs buildah,
// unless .ci/run said in CLUSTER_MAPPER_NO_IMAGE_BUILDER why it could not.
func imageBuilder(t *testing.T) string {
	if b := Builder(); b != "" {
		return b
	}
	msg := "no image builder on PATH: apt-get install -y buildah (or podman)"
	if why := os.Getenv(noBuilderReason); why != "" {
		t.Skip(msg + "; " + why)
	}
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; .ci/run installs it, and said nothing in " + noBuilderReason)
	}
	t.Skip(msg)
	return ""
}

// hackOutput runs a script of hack/ in root and returns its trimmed stdout.
func hackOutput(t *testing.T, root, script string, args ...string) string {
	t.Helper()
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v", script, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}
