package apiserver

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
)

// customizationStatusInterval is how often the status of Customizations is brought up to date.
const customizationStatusInterval = 2 * time.Second

// customizationFailures returns the function that reports the cache's rendering failures that
// a Customization caused (not an object's own spec-diff.kcp.io/ patch), for the status of
// Customizations.
func customizationFailures(c *cache.Cache) func() []customization.Failure {
	return func() []customization.Failure {
		var out []customization.Failure
		for _, f := range c.RenderFailures() {
			key, ok := f.Customization()
			if !ok {
				continue
			}
			reason, msg := customization.ReasonInternalError, f.Err.Error()
			var re *customization.RenderError
			if errors.As(f.Err, &re) {
				// The status names the Customization already.
				reason, msg = re.Reason, re.Err.Error()
				if re.Field != "" {
					msg = re.Field + ": " + msg
				}
			}
			out = append(out, customization.Failure{Customization: key, Resource: f.GVR.GroupResource().String(),
				Namespace: f.Namespace, Name: f.Name, Location: f.Location, Reason: reason, Message: msg})
		}
		return out
	}
}

// renderRefusals returns the function that reports the cache's renderings refused for
// changing a protected field or for their size (pkg/rendercheck), by a Customization or an
// object's own spec-diff.kcp.io/ patch, for the Events on the objects (customization.EventWriter).
func renderRefusals(c *cache.Cache) func() []customization.RefusedRendering {
	return func() []customization.RefusedRendering {
		var out []customization.RefusedRendering
		for _, f := range c.RenderFailures() {
			r := f.Refusal()
			if r == nil {
				continue
			}
			key, _ := f.Customization()
			out = append(out, customization.RefusedRendering{
				Cluster: f.Cluster,
				Object: corev1.ObjectReference{APIVersion: f.GVK.GroupVersion().String(), Kind: f.GVK.Kind,
					Namespace: f.Namespace, Name: f.Name, UID: f.UID, ResourceVersion: f.ResourceVersion},
				Location: f.Location, Customization: key.Name, Reason: r.Reason, Message: f.Err.Error(),
			})
		}
		return out
	}
}
