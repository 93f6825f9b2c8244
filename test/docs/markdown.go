package docs

import (
	"bufio"
	"bytes"
	"regexp"
	"strings"
	"unicode"
)

// Link is a Markdown link of a page: [text](Target).
type Link struct {
	// Line is the 1-based line of the page.
	Line int
	// Target is the link's destination as written.
	Target string
}

// Block is a fenced code block of a page.
type Block struct {
	// Line is the 1-based line of the fence that opens it.
	Line int
	// Info is the fence's info string (sh, yaml, ...).
	Info string
	// Lines are its lines.
	Lines []string
}

// Page is what the checks read of a Markdown file.
type Page struct {
	Links    []Link
	Blocks   []Block
	Headings []string // the GitHub anchors of its headings
}

var (
	linkRE       = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	inlineCodeRE = regexp.MustCompile("`[^`]*`")
)

// ParsePage reads the links outside code, the fenced code blocks and the heading anchors of a
// Markdown page.
func ParsePage(data []byte) Page {
	var p Page
	var block *Block
	fence := ""
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		trimmed := strings.TrimSpace(line)
		if block != nil {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				p.Blocks = append(p.Blocks, *block)
				block = nil
				continue
			}
			block.Lines = append(block.Lines, line)
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			block = &Block{Line: n, Info: strings.TrimSpace(trimmed[3:])}
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			p.Headings = append(p.Headings, Anchor(strings.TrimLeft(trimmed, "#")))
		}
		for _, m := range linkRE.FindAllStringSubmatch(inlineCodeRE.ReplaceAllString(line, ""), -1) {
			p.Links = append(p.Links, Link{Line: n, Target: m[1]})
		}
	}
	return p
}

// Anchor returns the anchor GitHub gives a heading: lower case, spaces to hyphens, punctuation
// other than hyphens and underscores dropped.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
