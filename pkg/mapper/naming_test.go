package mapper

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// TestNamingPlace: spec.naming's expressions place a copy from the location, cluster,
// namespace and name; a valid result is used as it is, a long one or one with characters a
// name cannot have is cut and hashed within 63 characters (the hash of the whole result, so
// two results differing only past the cut stay apart); a missing field keeps the default.
func TestNamingPlace(t *testing.T) {
	ctx := context.Background()
	src := SourceRef{Cluster: "root:org", Namespace: "apps", Name: "w1"}
	long := strings.Repeat("a", 70)
	for _, tc := range []struct {
		name                         string
		spec                         controlv1alpha1.ResourceMappingNaming
		defaultNS                    string
		wantNS, wantName             string
		wantHashedNS, wantHashedName bool
	}{
		{name: "namespace template", spec: controlv1alpha1.ResourceMappingNaming{Namespace: `"tenant-" + __namespace__`}, defaultNS: "apps", wantNS: "tenant-apps", wantName: "w1"},
		{name: "name template", spec: controlv1alpha1.ResourceMappingNaming{Name: `name + "-" + location`}, defaultNS: "apps", wantNS: "apps", wantName: "w1-east"},
		{name: "cluster-scoped keeps no namespace", spec: controlv1alpha1.ResourceMappingNaming{Namespace: `"tenant-" + __namespace__`, Name: `"x-" + name`}, defaultNS: "", wantNS: "", wantName: "x-w1"},
		{name: "invalid characters", spec: controlv1alpha1.ResourceMappingNaming{Namespace: `"tenant-" + cluster + "-" + __namespace__`}, defaultNS: "apps", wantHashedNS: true, wantName: "w1"},
		{name: "too long", spec: controlv1alpha1.ResourceMappingNaming{Name: `"` + long + `-" + name`}, defaultNS: "apps", wantNS: "apps", wantHashedName: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := CompileNaming(&tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			ns, name, err := n.Place(ctx, "east", src, tc.defaultNS)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what, got, want string, hashed bool) {
				if hashed {
					if msgs := validation.IsDNS1123Label(got); len(msgs) > 0 || len(got) > 63 || got[len(got)-11] != '-' {
						t.Errorf("%s %q is not a hashed DNS-1123 label: %v", what, got, msgs)
					}
					return
				}
				if got != want {
					t.Errorf("%s %q, want %q", what, got, want)
				}
			}
			check("namespace", ns, tc.wantNS, tc.wantHashedNS)
			check("name", name, tc.wantName, tc.wantHashedName)
		})
	}
	// The hash is of the whole result: two results that differ only past the cut differ.
	a, _ := CompileNaming(&controlv1alpha1.ResourceMappingNaming{Name: `"` + long + `-" + name`})
	_, n1, _ := a.Place(ctx, "east", SourceRef{Cluster: "c", Namespace: "apps", Name: "w1"}, "apps")
	_, n2, _ := a.Place(ctx, "east", SourceRef{Cluster: "c", Namespace: "apps", Name: "w2"}, "apps")
	if n1 == n2 || n1[:52] != n2[:52] {
		t.Errorf("long names %q and %q: want one prefix and different hashes", n1, n2)
	}
	// The prefixed namespace mapping makes its names with the same function (its hash is of
	// "<cluster>/<ns>", as before).
	if got, want := NamespaceMappingPrefixed.TargetNamespace("root:org", "apps"), HashedLabel("root:org-apps", "root:org/apps", "ns"); got != want {
		t.Errorf("TargetNamespace %q, HashedLabel %q", got, want)
	}
	var none *Naming
	if ns, name, err := none.Place(ctx, "east", src, "apps"); err != nil || ns != "apps" || name != "w1" {
		t.Errorf("no naming: %q %q %v, want apps w1", ns, name, err)
	}
}

// TestNamingFailures: a naming that does not compile (an undeclared variable, a syntax
// error, a result that is not a string) is an error naming the field, and a naming that
// compiles but cannot be evaluated for an object (an empty result, an evaluation error) gives
// that object no place.
func TestNamingFailures(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`object.metadata.name`, "spec.naming.name: "},
		{`name +`, "spec.naming.name: "},
		{`1`, "must return a string"},
		{`"tenant-" + namespace`, "write the source namespace as __namespace__"},
	} {
		if _, err := CompileNaming(&controlv1alpha1.ResourceMappingNaming{Name: tc.expr}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.expr, err, tc.want)
		}
	}
	for _, expr := range []string{`""`, `[name][3]`} {
		n, err := CompileNaming(&controlv1alpha1.ResourceMappingNaming{Namespace: expr})
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if ns, _, err := n.Place(context.Background(), "east", SourceRef{Cluster: "c", Namespace: "apps", Name: "w1"}, "apps"); err == nil {
			t.Errorf("%s: placed in %q, want an error", expr, ns)
		}
	}
}

// TestPlacesWinner: among objects none of which has a copy at a place, the lowest key
// (cluster, namespace, name) takes it, whatever the order they claimed it in; when it leaves
// the place (deleted, or its naming moves it), the next one does.
func TestPlacesWinner(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	place := targetPlace{GVR: gvr, Namespace: "apps", Name: "shared"}
	other := targetPlace{GVR: gvr, Namespace: "apps", Name: "other"}
	g1 := itemKey{GVR: gvr, Cluster: "c", Namespace: "apps", Name: "g1"}
	g2 := itemKey{GVR: gvr, Cluster: "c", Namespace: "apps", Name: "g2"}
	b0 := itemKey{GVR: gvr, Cluster: "b", Namespace: "zzz", Name: "z"}
	p := newPlaces()
	if _, ok := p.winner(place); ok {
		t.Fatal("a place nobody claims has a winner")
	}
	p.claim(place, g2)
	p.claim(place, g1)
	if w, _ := p.winner(place); w != g1 {
		t.Errorf("winner %v, want g1", w)
	}
	p.claim(place, b0)
	if w, _ := p.winner(place); w != b0 {
		t.Errorf("winner %v, want b|zzz/z (the lower cluster)", w)
	}
	if left, changed := p.claim(other, b0); !changed || left != place {
		t.Errorf("moving b0's claim: left %v %v, want the shared place", left, changed)
	}
	if w, _ := p.winner(place); w != g1 {
		t.Errorf("winner after b0 moved %v, want g1", w)
	}
	if left, had := p.unclaim(g1); !had || left != place {
		t.Errorf("unclaim g1: %v %v", left, had)
	}
	if w, _ := p.winner(place); w != g2 {
		t.Errorf("winner after g1 left %v, want g2", w)
	}
	p.dropClaims(gvr)
	if _, ok := p.winner(place); ok || len(p.claimed) != 0 || len(p.claims) != 0 {
		t.Errorf("claims left after dropClaims: %v %v", p.claims, p.claimed)
	}
}
