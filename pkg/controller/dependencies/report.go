package dependencies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	ctrlplacement "github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/worker"
)

// reportFor returns the report of the Placement named name, created on first use.
func (r *round) reportFor(name string) *report {
	rep := r.reports[name]
	if rep == nil {
		rep = &report{unmirrored: sets.New[string]()}
		r.reports[name] = rep
	}
	return rep
}

// reportMissing counts the references to objects that do not exist on the Placements of the
// referencing objects, and records a Warning Event MissingDependency on each referencing
// object once per (object, reference) while the reference is missing.
func (c *Controller) reportMissing(r *round) {
	now := sets.New[string]()
	for _, n := range r.missing {
		for _, ref := range n.referrers {
			if ref.placement != "" {
				r.reportFor(ref.placement).missing++
			}
			k := string(ref.obj.GetUID()) + "/" + n.ref.String()
			now.Insert(k)
			c.event(r, k, ref, "MissingDependency", fmt.Sprintf("%s %s/%s does not exist: it cannot follow to %s", n.ref.Resource, r.namespace, n.ref.Name,
				strings.Join(ref.locations, ", ")))
		}
	}
	c.forgetReported(r, now)
}

// reportPlacedElsewhere records, once per (object, dependency), a Warning Event
// DependencyPlacedElsewhere on each referencing object of d that is on a location d is not
// assigned to, because the Placement placement places d.
func (c *Controller) reportPlacedElsewhere(r *round, d *dep, placement string) {
	assigned := sets.New(locationsOf(d.obj)...)
	for _, ref := range d.referrers {
		var lacking []string
		for _, l := range ref.locations {
			if !assigned.Has(l) {
				lacking = append(lacking, l)
			}
		}
		if len(lacking) == 0 {
			continue
		}
		k := string(ref.obj.GetUID()) + "/placed/" + d.gvr.GroupResource().String() + "/" + d.obj.GetName()
		c.keepReported(r, k)
		c.event(r, k, ref, "DependencyPlacedElsewhere", fmt.Sprintf("%s %s/%s is placed by Placement %s and is not on %s: dependencies that a Placement selects do not follow (select only the workloads)",
			d.gvr.GroupResource(), r.namespace, d.obj.GetName(), placement, strings.Join(lacking, ", ")))
	}
}

// event records a Warning Event with reason about ref's object, once for the key k.
func (c *Controller) event(r *round, k string, ref *referrer, reason, note string) {
	nsKey := key(r.cluster, r.namespace)
	c.mu.Lock()
	done := c.reported[nsKey].Has(k)
	if !done {
		if c.reported[nsKey] == nil {
			c.reported[nsKey] = sets.New[string]()
		}
		c.reported[nsKey].Insert(k)
	}
	c.mu.Unlock()
	if !done && c.recorder != nil {
		c.recorder.Eventf(ref.obj, nil, "Warning", reason, "Follow", "%s", note)
	}
}

// keepReported marks k as still reported this round (see forgetReported).
func (c *Controller) keepReported(r *round, k string) {
	if r.kept == nil {
		r.kept = sets.New[string]()
	}
	r.kept.Insert(k)
}

// forgetReported forgets the reported keys of r's namespace that this round neither found
// missing (now) nor kept, so that a problem that comes back is reported again.
func (c *Controller) forgetReported(r *round, now sets.Set[string]) {
	nsKey := key(r.cluster, r.namespace)
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.reported[nsKey] {
		if !now.Has(k) && !r.kept.Has(k) {
			c.reported[nsKey].Delete(k)
		}
	}
	if c.reported[nsKey].Len() == 0 {
		delete(c.reported, nsKey)
	}
}

// reportUnmirrored records, on the Placements of the referencing objects, the resources of
// dependencies that the views of their locations do not serve (placement.Location.Mirrors).
func (c *Controller) reportUnmirrored(r *round) {
	for _, d := range r.deps {
		gr := d.gvr.GroupResource().String()
		for _, ref := range d.referrers {
			if ref.placement == "" {
				continue
			}
			for _, l := range ref.locations {
				if loc, ok := r.locations[l]; ok && !loc.Mirrors(gr) {
					r.reportFor(ref.placement).unmirrored.Insert(gr)
				}
			}
		}
	}
}

// writeReports writes, on each live Placement of the namespace, status.missingDependencies
// and status.unmirroredDependencies when they differ from the round's report, with a JSON
// merge patch of the status subresource: the placement controller writes the rest of the
// status and carries these two fields over.
func (c *Controller) writeReports(ctx context.Context, r *round) error {
	var errs []error
	for name, p := range r.placements {
		if !p.live {
			continue
		}
		rep := r.reportFor(name)
		unmirrored := sets.List(rep.unmirrored)
		if p.status.MissingDependencies == rep.missing && slices.Equal(p.status.UnmirroredDependencies, unmirrored) {
			continue
		}
		var list interface{}
		if len(unmirrored) > 0 {
			list = unmirrored
		}
		body, err := json.Marshal(map[string]interface{}{"status": map[string]interface{}{"missingDependencies": rep.missing, "unmirroredDependencies": list}})
		if err != nil {
			return err
		}
		_, err = c.dyn.Resource(ctrlplacement.Resource).Namespace(r.namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager}, "status")
		statusWrites.WithLabelValues(worker.Result(err)).Inc()
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("writing the dependency counts of Placement %s/%s: %w", r.namespace, name, err))
		}
	}
	return errors.Join(errs...)
}
