// Two pod specs built side by side: one with claims, one (a CPU sidecar job) without; neither mixes.
package controllers

import corev1 "k8s.io/api/core/v1"

func specs(template *string) []corev1.PodSpec {
	return []corev1.PodSpec{
		{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: template}},
			Containers:     []corev1.Container{{Name: "trainer", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}}}}},
		},
		{
			Containers: []corev1.Container{{Name: "reporter"}},
		},
	}
}
