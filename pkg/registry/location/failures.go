package location

import (
	"errors"
	"slices"
	"strings"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
)

// RenderFailures gives the (object, location) pairs whose current version does not render.
// *cache.Cache implements it (in O(failing objects)).
type RenderFailures interface {
	RenderFailures() []cache.RenderFailure
}

// maxFailureMessage caps the message of one failure, in bytes.
const maxFailureMessage = 512

// customizationFailures groups failures by location, then by the Customization that caused
// them (an object's own spec-diff.kcp.io/ patch is left out: it has no Customization to report
// to): each location's CustomizationFailures sorted by cluster, namespace and name, each with
// its count and its first v1alpha1.MaxRenderFailures failures sorted by resource, namespace and
// name. Every location's first ones together hold the first ones over all locations, which
// is what mapper-controller writes into a Customization's status.
func customizationFailures(failures []cache.RenderFailure) map[string][]mapper.CustomizationFailures {
	type group struct {
		key      customization.RuleKey
		failures []mapper.RenderFailure
	}
	byLocation := map[string]map[customization.RuleKey]*group{}
	for _, f := range failures {
		key, ok := f.Customization()
		if !ok {
			continue
		}
		reason, msg := customization.ReasonInternalError, f.Err.Error()
		var re *customization.RenderError
		if errors.As(f.Err, &re) {
			// The Customization is named by where the failure is listed.
			reason, msg = re.Reason, re.Err.Error()
			if re.Field != "" {
				msg = re.Field + ": " + msg
			}
		}
		groups := byLocation[f.Location]
		if groups == nil {
			groups = map[customization.RuleKey]*group{}
			byLocation[f.Location] = groups
		}
		g := groups[key]
		if g == nil {
			g = &group{key: key}
			groups[key] = g
		}
		g.failures = append(g.failures, mapper.RenderFailure{Resource: f.GVR.GroupResource().String(), Namespace: f.Namespace, Name: f.Name,
			Reason: reason, Message: contract.Truncate(msg, maxFailureMessage)})
	}
	out := make(map[string][]mapper.CustomizationFailures, len(byLocation))
	for loc, groups := range byLocation {
		list := make([]mapper.CustomizationFailures, 0, len(groups))
		for _, g := range groups {
			slices.SortFunc(g.failures, compareFailures)
			list = append(list, mapper.CustomizationFailures{
				Cluster: g.key.Cluster, Namespace: g.key.Namespace, Name: g.key.Name,
				FailingObjects: int64(len(g.failures)),
				Failures:       g.failures[:min(len(g.failures), v1alpha1.MaxRenderFailures)],
			})
		}
		slices.SortFunc(list, func(a, b mapper.CustomizationFailures) int {
			return strings.Compare(a.Cluster+"|"+a.Namespace+"/"+a.Name, b.Cluster+"|"+b.Namespace+"/"+b.Name)
		})
		out[loc] = list
	}
	return out
}

// compareFailures orders failures by resource, namespace and name.
func compareFailures(a, b mapper.RenderFailure) int {
	if c := strings.Compare(a.Resource, b.Resource); c != 0 {
		return c
	}
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}
