package mapper

import (
	"reflect"
	"sort"
	"testing"
)

// TestForeignFieldsAndDropFields: the mapper applied everything; an autoscaler set replicas
// through /scale; someone edited the app container's image (and touched the location label)
// with kubectl; a controller wrote status. The mapper's next apply leaves replicas and the
// image to them, keeps its own marking, and keeps the container's key field.
func TestForeignFieldsAndDropFields(t *testing.T) {
	live := mustObject(t, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  namespace: ns
  managedFields:
  - manager: cluster-mapper
    operation: Apply
    fieldsType: FieldsV1
    fieldsV1: {"f:metadata":{"f:labels":{"f:app":{},"f:kcp.io/location":{}}},"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:name":{},"f:env":{}},"k:{\"name\":\"sidecar\"}":{".":{},"f:name":{},"f:image":{}}}}}}}
  - manager: autoscaler
    operation: Update
    subresource: scale
    fieldsType: FieldsV1
    fieldsV1: {"f:spec":{"f:replicas":{}}}
  - manager: kubectl-edit
    operation: Update
    fieldsType: FieldsV1
    fieldsV1: {"f:metadata":{"f:labels":{"f:kcp.io/location":{}}},"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:name":{},"f:image":{}}}}}}}
  - manager: kube-controller-manager
    operation: Update
    subresource: status
    fieldsType: FieldsV1
    fieldsV1: {"f:status":{"f:replicas":{}}}
`)
	desired := mustObject(t, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  namespace: ns
  labels: {app: web, kcp.io/location: east}
spec:
  replicas: 3
  template:
    spec:
      containers:
      - {name: app, image: app:2, env: [{name: A, value: "1"}]}
      - {name: sidecar, image: side:1}
`)
	foreign, err := ForeignFields(live, "cluster-mapper")
	if err != nil {
		t.Fatal(err)
	}
	removed := DropFields(desired, foreign)
	sort.Strings(removed)
	want := []string{`.spec.replicas`, `.spec.template.spec.containers[name="app"].image`}
	if !reflect.DeepEqual(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	wantObj := mustObject(t, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  namespace: ns
  labels: {app: web, kcp.io/location: east}
spec:
  template:
    spec:
      containers:
      - {name: app, env: [{name: A, value: "1"}]}
      - {name: sidecar, image: side:1}
`)
	if !reflect.DeepEqual(desired.Object, wantObj.Object) {
		t.Errorf("after DropFields: %v", desired.Object)
	}
}

func TestDropFieldsWholeListItemAndSets(t *testing.T) {
	obj := mustObject(t, `
spec:
  ports: [{port: 80, protocol: TCP, name: a}, {port: 81, protocol: TCP, name: b}]
  finalizers: [one, two]
`)
	live := mustObject(t, `
metadata:
  managedFields:
  - manager: other
    operation: Apply
    fieldsType: FieldsV1
    fieldsV1: {"f:spec":{"f:ports":{"k:{\"port\":81,\"protocol\":\"TCP\"}":{}},"f:finalizers":{"v:\"two\"":{}}}}
`)
	foreign, err := ForeignFields(live, "cluster-mapper")
	if err != nil {
		t.Fatal(err)
	}
	DropFields(obj, foreign)
	want := mustObject(t, `
spec:
  ports: [{port: 80, protocol: TCP, name: a}]
  finalizers: [one]
`)
	if !reflect.DeepEqual(obj.Object, want.Object) {
		t.Errorf("after DropFields: %v", obj.Object)
	}
}

func TestForeignFieldsBadJSON(t *testing.T) {
	live := mustObject(t, `{metadata: {managedFields: [{manager: other, operation: Update, fieldsType: FieldsV1, fieldsV1: {"f:spec": 1}}]}}`)
	if _, err := ForeignFields(live, "cluster-mapper"); err == nil {
		t.Error("no error for unparsable fieldsV1")
	}
}
