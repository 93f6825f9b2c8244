package images

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Image is what an image archive holds: its config and its layers, in order.
type Image struct {
	// Config is the image configuration (entrypoint, user, labels).
	Config ocispec.Image
	// Layers are the layer tarballs, base first, uncompressed.
	Layers [][]byte
}

// ReadArchive reads the single image of a docker-archive (manifest.json, as `docker save`,
// `podman save` and `buildah push docker-archive:` write it) or an oci-archive (an OCI image
// layout in a tar: index.json and blobs/sha256/).
func ReadArchive(file string) (*Image, error) {
	entries, err := readTar(file)
	if err != nil {
		return nil, err
	}
	if m, ok := entries["manifest.json"]; ok {
		return readDockerArchive(entries, m)
	}
	if idx, ok := entries["index.json"]; ok {
		return readOCIArchive(entries, idx)
	}
	return nil, fmt.Errorf("%s has neither manifest.json (docker-archive) nor index.json (oci-archive)", file)
}

func readDockerArchive(entries map[string][]byte, manifest []byte) (*Image, error) {
	var m []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	if len(m) != 1 {
		return nil, fmt.Errorf("manifest.json lists %d images, want 1", len(m))
	}
	return assemble(entries, m[0].Config, m[0].Layers)
}

func readOCIArchive(entries map[string][]byte, index []byte) (*Image, error) {
	var idx ocispec.Index
	if err := json.Unmarshal(index, &idx); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	if len(idx.Manifests) != 1 {
		return nil, fmt.Errorf("index.json lists %d manifests, want 1", len(idx.Manifests))
	}
	blob := func(d ocispec.Descriptor) string {
		return path.Join("blobs", d.Digest.Algorithm().String(), d.Digest.Encoded())
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(entries[blob(idx.Manifests[0])], &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", idx.Manifests[0].Digest, err)
	}
	layers := make([]string, len(m.Layers))
	for i, l := range m.Layers {
		layers[i] = blob(l)
	}
	return assemble(entries, blob(m.Config), layers)
}

func assemble(entries map[string][]byte, config string, layers []string) (*Image, error) {
	img := &Image{}
	c, ok := entries[config]
	if !ok {
		return nil, fmt.Errorf("the archive has no config %s", config)
	}
	if err := json.Unmarshal(c, &img.Config); err != nil {
		return nil, fmt.Errorf("config %s: %w", config, err)
	}
	for _, name := range layers {
		l, ok := entries[name]
		if !ok {
			return nil, fmt.Errorf("the archive has no layer %s", name)
		}
		l, err := gunzipIfCompressed(l)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", name, err)
		}
		img.Layers = append(img.Layers, l)
	}
	return img, nil
}

// File returns the content and mode of the file at name (absolute, e.g. /usr/local/bin/mapper)
// in the image's filesystem: the last layer that has it wins, as in an overlay mount.
func (img *Image) File(name string) ([]byte, os.FileMode, error) {
	want := strings.TrimPrefix(path.Clean(name), "/")
	for i := len(img.Layers) - 1; i >= 0; i-- {
		tr := tar.NewReader(bytes.NewReader(img.Layers[i]))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, 0, fmt.Errorf("layer %d: %w", i, err)
			}
			if strings.TrimPrefix(path.Clean(h.Name), "/") != want {
				continue
			}
			if h.Typeflag != tar.TypeReg {
				return nil, 0, fmt.Errorf("%s is not a regular file in layer %d (type %q)", name, i, h.Typeflag)
			}
			b, err := io.ReadAll(tr)
			return b, h.FileInfo().Mode(), err
		}
	}
	return nil, 0, fmt.Errorf("no layer has %s", name)
}

// RegularFiles returns the paths (without a leading /) of the regular files of the image's
// filesystem, over all its layers, sorted.
func (img *Image) RegularFiles() []string {
	seen := map[string]bool{}
	for _, l := range img.Layers {
		tr := tar.NewReader(bytes.NewReader(l))
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if h.Typeflag == tar.TypeReg {
				seen[strings.TrimPrefix(path.Clean(h.Name), "/")] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for f := range seen {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// readTar returns the regular files of a tar by name.
func readTar(file string) (map[string][]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(bufio.NewReader(f))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", file, h.Name, err)
		}
		out[path.Clean(h.Name)] = b
	}
}

func gunzipIfCompressed(b []byte) ([]byte, error) {
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}
