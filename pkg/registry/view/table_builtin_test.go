package view

import (
	"context"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func mustUnstructured(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func columnNames(table *metav1.Table) []string {
	names := make([]string, 0, len(table.ColumnDefinitions))
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	return names
}

// TestBuiltinTable prints built-in kinds the way kube-apiserver does (its printers' columns and
// cells, computed from the served object), keeps the list's paging fields, and puts the view's
// own objects back into the rows.
func TestBuiltinTable(t *testing.T) {
	deployment := mustUnstructured(t, `{apiVersion: apps/v1, kind: Deployment,
  metadata: {name: web, namespace: apps, resourceVersion: "7"},
  spec: {replicas: 3, selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: nginx}, {name: d, image: busybox}]}}},
  status: {replicas: 3, readyReplicas: 2, updatedReplicas: 1, availableReplicas: 2}}`)
	service := mustUnstructured(t, `{apiVersion: v1, kind: Service,
  metadata: {name: svc, namespace: apps},
  spec: {type: NodePort, clusterIP: 10.0.0.7, clusterIPs: [10.0.0.7], selector: {app: web}, ports: [{port: 80, nodePort: 30080, protocol: TCP}]}}`)

	cases := []struct {
		name    string
		gvr     schema.GroupVersionResource
		kind    string
		obj     runtime.Object
		columns []string
		// cells are the row's cells, AGE (the creation time is not set) excluded by index.
		cells []interface{}
		age   int
	}{{
		name: "deployment", gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, kind: "Deployment",
		obj:     deployment,
		columns: []string{"Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"},
		cells:   []interface{}{"web", "2/3", int64(1), int64(2), nil, "c,d", "nginx,busybox", "app=web"}, age: 4,
	}, {
		name: "service list", gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"}, kind: "Service",
		obj: &List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceList"},
			ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next"}, Items: []runtime.Object{service}},
		columns: []string{"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"},
		cells:   []interface{}{"svc", "NodePort", "10.0.0.7", "<none>", "80:30080/TCP", nil, "app=web"}, age: 5,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conv := newTableConvertor(nil, c.gvr, c.kind)
			if conv.builtin == nil {
				t.Fatalf("%v is not printed as a built-in kind", c.gvr)
			}
			table, err := conv.ConvertToTable(context.Background(), c.obj, &metav1.TableOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := columnNames(table); !reflect.DeepEqual(got, c.columns) {
				t.Errorf("columns %q, want %q", got, c.columns)
			}
			if len(table.Rows) != 1 {
				t.Fatalf("%d rows, want 1", len(table.Rows))
			}
			cells := append([]interface{}{}, table.Rows[0].Cells...)
			if len(cells) == len(c.cells) {
				cells[c.age] = nil
			}
			if !reflect.DeepEqual(cells, c.cells) {
				t.Errorf("cells %#v, want %#v", cells, c.cells)
			}
			want := c.obj
			if l, ok := c.obj.(*List); ok {
				want = l.Items[0]
				if table.ResourceVersion != "42" || table.Continue != "next" {
					t.Errorf("the table has resourceVersion %q and continue %q, want the list's", table.ResourceVersion, table.Continue)
				}
			}
			if table.Rows[0].Object.Object != want {
				t.Errorf("the row holds %T, want the view's object", table.Rows[0].Object.Object)
			}

			table, err = conv.ConvertToTable(context.Background(), c.obj, &metav1.TableOptions{NoHeaders: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(table.ColumnDefinitions) != 0 || len(table.Rows) != 1 {
				t.Errorf("noHeaders: %d columns and %d rows, want 0 and 1", len(table.ColumnDefinitions), len(table.Rows))
			}
		})
	}
}

// TestBuiltinTableOnlyForBuiltinKinds keeps custom resources on the CRD path, and answers a 500
// (not a panic) for an object that does not convert to the kind.
func TestBuiltinTableOnlyForBuiltinKinds(t *testing.T) {
	if conv := newTableConvertor(nil, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, "Widget"); conv.builtin != nil || conv.crd == nil {
		t.Errorf("a custom resource is printed as a built-in kind")
	}
	conv := newTableConvertor(nil, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment")
	bad := mustUnstructured(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: bad}, spec: {replicas: "three"}}`)
	if _, err := conv.ConvertToTable(context.Background(), bad, nil); !apierrors.IsInternalError(err) {
		t.Errorf("an object that does not convert: %v, want a 500", err)
	}
}
