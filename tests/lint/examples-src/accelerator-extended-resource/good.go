// The same controller with a DRA claim: the pod names a ResourceClaimTemplate and the container
// uses the claim. The toleration's key is a taint, not a request, and CPU limits are fine.
package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func shardPod(name string) *corev1.Pod {
	template := "four-gpus"
	return &corev1.Pod{
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: &template}},
			Tolerations:    []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "trainer",
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
					Claims: []corev1.ResourceClaim{{Name: "gpus"}},
				},
			}},
		},
	}
}
