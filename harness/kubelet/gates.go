package main

import (
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	kubefeatures "k8s.io/kubernetes/pkg/features"
)

func resourceHealthStatusEnabled() bool {
	return utilfeature.DefaultFeatureGate.Enabled(kubefeatures.ResourceHealthStatus)
}
