package view

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metatable "k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// tableConvertor renders view objects as a Table for kubectl: NAME and AGE, the columns
// kube-apiserver prints for every resource that has no printer of its own.
type tableConvertor struct{}

var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
}

// ConvertToTable turns one object or a view List into a Table with one row per object; the
// list's resourceVersion and continue token are carried over so kubectl can page and watch.
func (tableConvertor) ConvertToTable(_ context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	if o, ok := opts.(*metav1.TableOptions); !ok || !o.NoHeaders {
		table.ColumnDefinitions = tableColumns
	}
	rows, err := metatable.MetaToTableRow(obj, func(_ runtime.Object, _ metav1.Object, name, age string) ([]interface{}, error) {
		return []interface{}{name, age}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot render table: %w", err)
	}
	table.Rows = rows
	if l, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = l.GetResourceVersion()
		table.Continue = l.GetContinue()
		table.RemainingItemCount = l.GetRemainingItemCount()
	} else if m, err := meta.Accessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table, nil
}
