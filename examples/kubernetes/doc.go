// Package kubernetes holds the Kubernetes example: plain manifests for two
// outboxd replicas (an active one and a hot standby on the same slot), a
// Secret, a Service and a PodDisruptionBudget. Its test validates them
// against the Kubernetes API types offline and checks that they fit
// together and use only settings outboxd has.
package kubernetes
