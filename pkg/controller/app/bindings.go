package app

import (
	"context"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/events"

	"github.com/cluster-mapper/cluster-mapper/pkg/controller/binding"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/informers"
)

// runBindingControllers runs the controllers of the Bound location-access mode
// (docs/tenancy.md) until ctx ends: the status of LocationBindings (status.locations,
// boundLocations, Ready) and the Warning Events UnboundLocation on the objects of
// --unbound-report-resources assigned to locations not bound to their namespace.
func runBindingControllers(ctx context.Context, o *Options, dyn dynamic.Interface, bindings *binding.Tracker, shared *informers.Set, mapper meta.RESTMapper, recorder events.EventRecorder) {
	var resources []schema.GroupResource
	for _, r := range o.UnboundReportResources {
		resources = append(resources, schema.ParseGroupResource(strings.TrimSpace(r)))
	}
	statuses := binding.New(dyn, bindings, o.Workers)
	reporter := binding.NewReporter(bindings, shared, mapper, recorder, resources)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		statuses.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		reporter.Run(ctx)
	}()
	wg.Wait()
}
