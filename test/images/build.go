package images

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Builder returns the image builder on PATH, buildah or podman, or "" when there is neither.
func Builder() string {
	for _, b := range []string{"buildah", "podman"} {
		if _, err := exec.LookPath(b); err == nil {
			return b
		}
	}
	return ""
}

// Hack runs hack/images.sh with arg (binaries, build, save, list) in the repository root, the
// images tagged <repo>/<name>:<version> and written (with the binaries) below out, and returns
// its stdout; the error carries its output.
func Hack(root, out, repo, builder, arg string) (string, error) {
	cmd := exec.Command("bash", "hack/images.sh", arg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "IMAGES_OUTPUT="+out, "IMAGE_REPO="+repo)
	if builder != "" {
		cmd.Env = append(cmd.Env, "IMAGE_BUILDER="+builder)
	}
	stdout, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return "", fmt.Errorf("hack/images.sh %s: %w\n%s%s", arg, err, stdout, stderr)
	}
	return string(stdout), nil
}

// Refs returns the image references hack/images.sh build tags for repo now (one per command,
// <repo>/<name>:<version>); take them before building, as the version follows the tree.
func Refs(root, repo string) ([]string, error) {
	refs, err := Hack(root, "", repo, "", "list")
	return strings.Fields(refs), err
}

// Remove deletes the images refs (from Refs) and their latest tags from the builder's storage.
func Remove(builder string, refs []string) error {
	for _, ref := range refs {
		latest := ref[:strings.LastIndex(ref, ":")] + ":latest"
		if b, err := exec.Command(builder, "rmi", ref, latest).CombinedOutput(); err != nil {
			return fmt.Errorf("%s rmi %s: %w\n%s", builder, ref, err, b)
		}
	}
	return nil
}

// ExtractEntrypoint writes the image's entrypoint executable to dir/<base name>, mode 0755, and
// returns its path: the binary a container of the image would run.
func (img *Image) ExtractEntrypoint(dir string) (string, error) {
	ep := img.Config.Config.Entrypoint
	if len(ep) == 0 {
		return "", fmt.Errorf("the image has no entrypoint")
	}
	b, _, err := img.File(ep[0])
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, filepath.Base(ep[0]))
	return path, os.WriteFile(path, b, 0o755)
}
