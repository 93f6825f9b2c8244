// Package placement holds the pure rules of a Placement (docs/placement.md): which
// locations match it, which of them are usable, where each group goes (everything a
// Placement selects, or one object with spreadBy: Object; rendezvous hashing, sticky for
// Duplicate), and how replicas are divided. It reads no API server:
// pkg/controller/placement feeds it SyncTargets and objects from informers and writes what it
// decides.
package placement
