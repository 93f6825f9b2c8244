// Package dependencies holds the pure rules of what an object references (docs/dependencies.md):
// the references of a Pod template (ConfigMaps, Secrets, the ServiceAccount, PVCs; Services,
// HorizontalPodAutoscalers and PodDisruptionBudgets that select or target the workload) and
// of the objects a DependencyRule names (a CEL expression). It reads no API server:
// pkg/controller/dependencies feeds it objects from informers and assigns what they
// reference to their locations.
package dependencies
