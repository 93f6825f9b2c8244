package apiserver

import (
	"errors"
	"time"

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
