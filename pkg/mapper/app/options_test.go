package app

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
)

func TestLocationFromViewURL(t *testing.T) {
	for server, want := range map[string]string{
		"https://127.0.0.1:6443/apis/mapper.kcp.io/v1alpha1/locations/east/proxy":           "east",
		"https://proxy.example.com/prefix/apis/mapper.kcp.io/v1alpha1/locations/w-2/proxy/": "w-2",
		"https://127.0.0.1:6443": "",
		"https://127.0.0.1:6443/apis/mapper.kcp.io/v1alpha1/locations/east":           "",
		"https://127.0.0.1:6443/apis/mapper.kcp.io/v1alpha1/locations/east/proxy/api": "",
	} {
		got, err := LocationFromViewURL(server)
		if want == "" {
			if err == nil {
				t.Errorf("%s: got location %q, want an error", server, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", server, got, err, want)
		}
	}
}

// writeKubeconfig writes a kubeconfig for server into dir.
func writeKubeconfig(t *testing.T, dir, name, server string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	path := filepath.Join(dir, name)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestComplete(t *testing.T) {
	dir := t.TempDir()
	view := writeKubeconfig(t, dir, "view", "https://127.0.0.1:1/apis/mapper.kcp.io/v1alpha1/locations/east/proxy")
	target := writeKubeconfig(t, dir, "target", "https://127.0.0.1:2")
	notAView := writeKubeconfig(t, dir, "plain", "https://127.0.0.1:3")

	o := NewConnectionOptions()
	o.ViewKubeconfig, o.TargetKubeconfig = view, target
	c, err := o.Complete("test")
	if err != nil {
		t.Fatal(err)
	}
	if c.Location != "east" || c.Target.Host != "https://127.0.0.1:2" || c.View.QPS != o.TargetQPS || c.NamespaceMapping != mapper.NamespaceMappingAuto {
		t.Errorf("Complete = %+v", c)
	}

	for name, change := range map[string]func(*ConnectionOptions){
		"location mismatch":   func(o *ConnectionOptions) { o.Location = "west" },
		"not a view URL":      func(o *ConnectionOptions) { o.ViewKubeconfig = notAView },
		"no view kubeconfig":  func(o *ConnectionOptions) { o.ViewKubeconfig = "" },
		"bad mapping":         func(o *ConnectionOptions) { o.NamespaceMapping = "hashed" },
		"empty resource":      func(o *ConnectionOptions) { o.Resources = []string{"configmaps", " "} },
		"missing target file": func(o *ConnectionOptions) { o.TargetKubeconfig = filepath.Join(dir, "nope") },
	} {
		o := NewConnectionOptions()
		o.ViewKubeconfig, o.TargetKubeconfig = view, target
		change(o)
		if _, err := o.Complete("test"); err == nil {
			t.Errorf("%s: no error", name)
		} else if name == "location mismatch" && !strings.Contains(err.Error(), `"east"`) {
			t.Errorf("%s: the error does not name the URL's location: %v", name, err)
		}
	}
}

// TestClientsFor: in-memory configs get the same checks and limits as kubeconfig files, and
// the caller's configs are not modified.
func TestClientsFor(t *testing.T) {
	view := &rest.Config{Host: "https://127.0.0.1:1/apis/mapper.kcp.io/v1alpha1/locations/east/proxy"}
	target := &rest.Config{Host: "https://127.0.0.1:2"}
	o := NewConnectionOptions()
	o.Location = "east"
	c, err := o.ClientsFor("test", view, target)
	if err != nil {
		t.Fatal(err)
	}
	if c.Location != "east" || c.View.UserAgent != "test" || c.Target.QPS != o.TargetQPS || view.UserAgent != "" || target.QPS != 0 {
		t.Errorf("ClientsFor = %+v (view %+v, target %+v)", c, view, target)
	}
	o.Location = "west"
	if _, err := o.ClientsFor("test", view, target); err == nil {
		t.Error("a location that does not match the view URL was accepted")
	}
	o = NewConnectionOptions()
	o.FieldManager = ""
	if _, err := o.ClientsFor("test", view, target); err == nil || o.Validate() == nil {
		t.Error("an empty field manager was accepted")
	}
}

// TestRunOptionsProfiling: --profiling is off unless given, as mapper-controller's.
func TestRunOptionsProfiling(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--profiling"}, true}, {[]string{"--profiling=false"}, false}} {
		o := NewRunOptions()
		fs := pflag.NewFlagSet("mapper", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if o.Profiling != c.want {
			t.Errorf("%v: Profiling = %v, want %v", c.args, o.Profiling, c.want)
		}
	}
}

// TestShardOptions: --shard and a view URL naming a part give the mapper its part and the
// whole location's view URL; a mismatch, a bad shard or --shard with the auto namespace
// mapping is refused.
func TestShardOptions(t *testing.T) {
	const base = "https://127.0.0.1:1/p/apis/mapper.kcp.io/v1alpha1/locations/east/proxy"
	target := &rest.Config{Host: "https://127.0.0.1:2"}
	for _, c := range []struct {
		server, shard, wantPart string
	}{
		{base, "", ""},
		{base, "1/4", "shards/1-of-4"},
		{base + "/clusters/c1", "", "clusters/c1"},
		{base + "/clusters/c1", "3/4", "clusters/c1/shards/3-of-4"},
		{base + "/shards/2-of-4/", "2/4", "shards/2-of-4"},
		{base + "/shards/2-of-4", "", "shards/2-of-4"},
	} {
		o := NewConnectionOptions()
		o.Shard, o.NamespaceMapping = c.shard, "same"
		got, err := o.ClientsFor("test", &rest.Config{Host: c.server}, target)
		if err != nil {
			t.Errorf("%s --shard=%q: %v", c.server, c.shard, err)
			continue
		}
		if got.Part.String() != c.wantPart || got.View.Host != base || got.Location != "east" {
			t.Errorf("%s --shard=%q: part %q view %q location %q; want part %q view %q", c.server, c.shard, got.Part, got.View.Host, got.Location, c.wantPart, base)
		}
	}
	for _, c := range []struct{ server, shard, mapping, wantErr string }{
		{base + "/shards/2-of-4", "1/4", "same", "does not match"},
		{base, "4/4", "same", "--shard"},
		{base, "1-of-4", "same", "--shard"},
		{base, "1/4", "auto", "explicit --namespace-mapping"},
	} {
		o := NewConnectionOptions()
		o.Shard, o.NamespaceMapping = c.shard, c.mapping
		if _, err := o.ClientsFor("test", &rest.Config{Host: c.server}, target); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s --shard=%q --namespace-mapping=%s: %v, want an error with %q", c.server, c.shard, c.mapping, err, c.wantErr)
		}
	}
}
