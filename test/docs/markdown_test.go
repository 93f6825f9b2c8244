package docs

import (
	"reflect"
	"testing"
)

func TestParsePage(t *testing.T) {
	p := ParsePage([]byte("# A title, with: punctuation\n" +
		"See [views](views.md#the-view) and `[not](a-link.md)` and [web](https://example.com).\n" +
		"```sh\n[inside](code.md)\nbin/mapper --help\n```\n" +
		"## Second `code` heading\n"))
	wantLinks := []Link{{Line: 2, Target: "views.md#the-view"}, {Line: 2, Target: "https://example.com"}}
	if !reflect.DeepEqual(p.Links, wantLinks) {
		t.Errorf("links %+v, want %+v", p.Links, wantLinks)
	}
	if want := []string{"a-title-with-punctuation", "second-code-heading"}; !reflect.DeepEqual(p.Headings, want) {
		t.Errorf("headings %q, want %q", p.Headings, want)
	}
	if len(p.Blocks) != 1 || p.Blocks[0].Info != "sh" || !reflect.DeepEqual(p.Blocks[0].Lines, []string{"[inside](code.md)", "bin/mapper --help"}) {
		t.Errorf("blocks %+v", p.Blocks)
	}
}
