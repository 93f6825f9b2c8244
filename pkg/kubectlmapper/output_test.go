package kubectlmapper

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestOutputFormats prints one ObjectLocation in each format of -o: the table (wide adds the
// priority 1 columns), a List for json, yaml, name and jsonpath, and the object alone when one
// was asked for by name.
func TestOutputFormats(t *testing.T) {
	l := ObjectLocation{Location: "east", Assigned: true, AssignedBy: AssignedByHand, Finalizer: true}
	item, err := toItem("ObjectLocation", &l)
	if err != nil {
		t.Fatal(err)
	}
	item.SetName(l.Location)
	table := &metav1.Table{ColumnDefinitions: whereColumns, Rows: []metav1.TableRow{{Cells: whereRow(l, time.Now()), Object: runtime.RawExtension{Object: item}}}}
	items := []*unstructured.Unstructured{item}
	for _, c := range []struct {
		format      string
		single      bool
		want, avoid string
	}{
		{"", false, "LOCATION   ASSIGNED-BY   OUTCOME   STATUS   DELETION\neast       Hand          <none>    <none>   <none>\n", "FINALIZER"},
		{"wide", false, "FINALIZER", ""},
		{"json", false, `"kind": "List"`, ""},
		{"json", true, `"kind": "ObjectLocation"`, `"List"`},
		{"yaml", false, "apiVersion: " + OutputGroupVersion + "\n  assigned: true\n  assignedBy: Hand\n", ""},
		{"name", false, "objectlocation.cli.mapper.kcp.io/east\n", ""},
		{"jsonpath={.items[0].assignedBy}", false, "Hand", ""},
	} {
		o := newOutput()
		format := c.format
		o.flags.OutputFormat = &format
		if err := o.validate(); err != nil {
			t.Fatalf("-o %s: %v", c.format, err)
		}
		var b bytes.Buffer
		if err := o.print(&b, table, items, c.single); err != nil {
			t.Fatalf("-o %s: %v", c.format, err)
		}
		if !strings.Contains(b.String(), c.want) || (c.avoid != "" && strings.Contains(b.String(), c.avoid)) {
			t.Errorf("-o %s printed:\n%s\nwant %q, without %q", c.format, b.String(), c.want, c.avoid)
		}
	}
	o := newOutput()
	bad := "xml"
	o.flags.OutputFormat = &bad
	if err := o.validate(); err == nil {
		t.Error("-o xml is no error")
	}
}
