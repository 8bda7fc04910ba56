// A pod spec with a DRA claim that also asks the device plugin for a GPU.
package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func mixedSpec() corev1.PodSpec {
	template := "one-nic"
	return corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "nic", ResourceClaimTemplateName: &template}}, // expect
		Containers: []corev1.Container{{
			Name: "trainer",
			Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}, // expect accelerator-extended-resource
				Claims: []corev1.ResourceClaim{{Name: "nic"}},
			},
		}},
	}
}
