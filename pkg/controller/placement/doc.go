// Package placement is mapper-controller's placement controller (docs/placement.md):
// it writes kcp.io/assigned-locations (and, to divide replicas, spec-diff.kcp.io/<location>
// patches of /spec/replicas and kcp.io/status-policy: Summarize) on the objects each Placement
// selects, with server-side apply under the field manager mapper-controller-placement, and
// keeps each Placement's status. By default everything a Placement selects is one group, placed
// together; spreadBy: Object places each object alone. The rules are pkg/placement's; this
// package reads them their input from informers and writes what they decide, only when it
// changed. What the placed objects reference follows them by the dependency controller
// (pkg/controller/dependencies).
//
// One key is one namespace (with its logical cluster in kcp mode): every Placement of a
// namespace competes for the same objects (the older wins), so they are reconciled together
// and never concurrently.
package placement
