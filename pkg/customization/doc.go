// Package customization is the rendering engine of Customizations (control.mapper.kcp.io/v1alpha1,
// docs/customization.md): per-location changes to source objects that a location's view applies, so that the
// view shows exactly what lands on the target.
//
// A Snapshot holds the compiled Customizations and the locations (SyncTarget name, labels and
// annotations) at one source resourceVersion; it implements Rules, the seam with the view side
// in pkg/cache (docs: /work/notes/RENDER-INTERFACE.md at the time of writing, and
// docs/customization.md). Render applies, for one object and one location, the Customizations
// that select it in name order and then the object's own spec-diff.kcp.io/<location> patch
// (pkg/specdiff), and removes every spec-diff.kcp.io/ annotation.
//
// CEL is compiled and evaluated with k8s.io/apiserver's MutatingAdmissionPolicy machinery
// (pkg/admission/plugin/cel's composited compiler, pkg/admission/plugin/policy/mutating/patch's
// JSONPatch and ApplyConfiguration patchers, webhook/matchconditions for matchConditions), with
// the same cost limits. The one addition is the variable `location` (env.go).
//
// Every step of a rendering (each mutation, the object's own patch) is held to
// pkg/rendercheck's rule: it may change neither the object's identity nor the system's marks,
// and may not grow past Options.MaxRenderingBytes; a refused step fails the rendering
// (ReasonProtectedFieldChanged, ReasonRenderingTooLarge).
//
// A Follower keeps Snapshots current from informers on the source's Customizations and
// SyncTargets and delivers them in resourceVersion order. A StatusWriter reports failures in
// the Customizations' status, an EventWriter refused renderings as Events on their objects.
package customization
