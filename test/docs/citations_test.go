package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outsideCitation matches what the repository may not cite: the shared design file outside it,
// a relative path out of it into the shared directory, and issue numbers (a reader of a clone has
// neither). It is assembled from parts so that this file does not match itself.
var outsideCitation = regexp.MustCompile(strings.Join([]string{
	`DESIGN` + `\.md`,
	`[Ii]ssue ?` + `[0-9]`,
	`\.\./` + `shared`,
}, "|"))

var (
	splitIssue    = regexp.MustCompile(`[Ii]ssue$`)
	leadingNumber = regexp.MustCompile(`^\s*(?://|#)?\s*[0-9]`)
)

// skippedDirs are build output and state that is not part of the repository (.gitignore).
var skippedDirs = map[string]bool{".git": true, "bin": true, "_output": true, ".demo": true, "profiles": true}

// TestNoCitationsOutsideTheRepository checks every text file of the repository for citations a
// reader of a clone cannot follow. Cite docs/design.md by section (docs/design.md, "Names") or
// another page of docs/, or say the reason itself.
func TestNoCitationsOutsideTheRepository(t *testing.T) {
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if skippedDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.IndexByte(data, 0) >= 0 {
			return nil // binary
		}
		s := bufio.NewScanner(bytes.NewReader(data))
		s.Buffer(make([]byte, 1<<20), 4<<20)
		prev := ""
		for n := 1; s.Scan(); n++ {
			line := s.Text()
			// A citation broken over two lines: "... (issue" and "// 10 item 2 ...".
			split := splitIssue.MatchString(prev) && leadingNumber.MatchString(line)
			if outsideCitation.MatchString(line) || split {
				found = append(found, fmt.Sprintf("%s:%d: %s", rel, n, strings.TrimSpace(line)))
			}
			prev = line
		}
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
	if len(found) > 0 {
		t.Errorf("%d lines cite files outside the repository or issue numbers; cite docs/design.md (by section) or docs/*.md, or state the reason", len(found))
	}
}
