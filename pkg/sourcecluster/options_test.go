package sourcecluster

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestOptions(t *testing.T) {
	for _, c := range []struct {
		o       Options
		invalid string
	}{
		{Options{Mode: ModePlain, ClusterName: "default"}, ""},
		{Options{Mode: ModePlain, ClusterName: "Not/Valid"}, "--cluster-name"},
		{Options{Mode: ModeKCP, ClusterPath: DefaultClusterPath}, ""},
		{Options{Mode: ModeKCP, ClusterPath: "/clusters/root"}, "--source-cluster-path"},
		{Options{Mode: "both"}, "--source-mode"},
	} {
		err := c.o.Validate()
		if (err == nil) != (c.invalid == "") || (err != nil && !strings.Contains(err.Error(), c.invalid)) {
			t.Errorf("%+v: Validate() = %v, want an error naming %q", c.o, err, c.invalid)
		}
	}

	plain := &Options{Mode: ModePlain, ClusterName: "default"}
	writers, err := plain.Writers(&rest.Config{Host: "https://source:6443"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writers("default"); err != nil {
		t.Errorf("the plain source's cluster: %v", err)
	}
	if _, err := writers("other"); err == nil {
		t.Errorf("a plain source gave a client of another logical cluster")
	}
	if plain.PlainCluster() != "default" || (&Options{Mode: ModeKCP}).PlainCluster() != "" {
		t.Errorf("PlainCluster: the plain source's cluster, none for kcp")
	}
}
