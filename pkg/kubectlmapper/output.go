package kubectlmapper

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
)

// OutputGroupVersion is the apiVersion of the objects the plugin prints with -o json|yaml
// (LocationSummary, ObjectLocation). No server serves it: it names the shape of the plugin's
// output, so that scripts can tell it from the API's objects.
const OutputGroupVersion = "cli.mapper.kcp.io/v1alpha1"

// none is the cell of a value that is not known, as kubectl's printers write it.
const none = "<none>"

// output prints a command's result as kubectl get does: a table (wide adds the columns of
// priority 1) by default or with -o wide, and every format of cli-runtime's PrintFlags
// (json, yaml, name, jsonpath, go-template) otherwise.
type output struct {
	flags *genericclioptions.PrintFlags
}

// newOutput returns the output flags; addFlags registers them.
func newOutput() *output {
	return &output{flags: genericclioptions.NewPrintFlags("")}
}

// addFlags registers -o and the template flags of cmd.
func (o *output) addFlags(cmd *cobra.Command) {
	o.flags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format. One of: (wide, %s). Empty: a table.", strings.Join(o.flags.AllowedFormats(), ", "))
}

// format returns the -o value.
func (o *output) format() string {
	if o.flags.OutputFormat == nil {
		return ""
	}
	return *o.flags.OutputFormat
}

// validate returns an error for an -o value no printer knows.
func (o *output) validate() error {
	switch o.format() {
	case "", "wide":
		return nil
	}
	_, err := o.flags.ToPrinter()
	return err
}

// print writes table (-o wide shows its priority 1 columns) or, for the other formats, items
// as a List (a single item alone when single is true).
func (o *output) print(w io.Writer, table *metav1.Table, items []*unstructured.Unstructured, single bool) error {
	switch f := o.format(); f {
	case "", "wide":
		return printers.NewTablePrinter(printers.PrintOptions{Wide: f == "wide"}).PrintObj(table, w)
	}
	p, err := o.flags.ToPrinter()
	if err != nil {
		return err
	}
	if single && len(items) == 1 {
		return p.PrintObj(items[0], w)
	}
	list := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "v1", "kind": "List", "metadata": map[string]interface{}{}}}
	for _, i := range items {
		list.Items = append(list.Items, *i)
	}
	if list.Items == nil {
		list.Items = []unstructured.Unstructured{}
	}
	return p.PrintObj(list, w)
}

// toItem converts v, a pointer to one of the plugin's output structs, to an object of kind
// and OutputGroupVersion.
func toItem(kind string, v interface{}) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(OutputGroupVersion)
	u.SetKind(kind)
	return u, nil
}

// age renders how long before now t was, as kubectl's AGE column; "<none>" for nil or the
// zero time.
func age(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return none
	}
	return duration.HumanDuration(now.Sub(*t))
}
