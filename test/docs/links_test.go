package docs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the repository root, from this package's directory.
const root = "../.."

// pages returns README.md and every Markdown page of docs/ (whatever pages exist: each helper's
// new page is checked as soon as it is there), relative to root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		out = append(out, rel)
	}
	return out
}

// TestLinksResolve checks every link of README.md and docs/: a relative link names a file or
// directory inside the repository (never above it), and its #anchor, on a Markdown page, one of
// that page's headings. Links to web addresses are not followed (the tests have no network).
func TestLinksResolve(t *testing.T) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	parsed := map[string]Page{}
	parse := func(rel string) Page {
		if p, ok := parsed[rel]; ok {
			return p
		}
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		parsed[rel] = ParsePage(data)
		return parsed[rel]
	}
	checked := 0
	for _, page := range pages(t) {
		for _, l := range parse(page).Links {
			if strings.Contains(l.Target, "://") || strings.HasPrefix(l.Target, "mailto:") {
				continue
			}
			checked++
			target, anchor, _ := strings.Cut(l.Target, "#")
			rel := page
			if target != "" {
				rel = filepath.Join(filepath.Dir(page), target)
			}
			abs, err := filepath.Abs(filepath.Join(root, rel))
			if err != nil || (abs != absRoot && !strings.HasPrefix(abs, absRoot+string(filepath.Separator))) {
				t.Errorf("%s:%d: %s points outside the repository", page, l.Line, l.Target)
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s:%d: %s: no such file in the repository", page, l.Line, l.Target)
				continue
			}
			if anchor != "" && strings.HasSuffix(rel, ".md") && !slices.Contains(parse(filepath.Clean(rel)).Headings, anchor) {
				t.Errorf("%s:%d: %s: %s has no heading with the anchor #%s", page, l.Line, l.Target, filepath.Clean(rel), anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no links found: the parser is broken")
	}
}

// TestDesignSections checks that docs/design.md has the sections that comments cite by name
// (docs/design.md, "Names").
func TestDesignSections(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := ParsePage(data).Headings
	for _, s := range []string{"What the system is", "Invariants", "Names", "The location view", "Authorization",
		"Status records", "The control plane objects", "Layout", "Testing notes"} {
		if !slices.Contains(headings, Anchor(s)) {
			t.Errorf("docs/design.md has no section %q", s)
		}
	}
}
