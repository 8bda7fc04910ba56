// A controller that builds one pod per shard, each asking for four GPUs as an extended resource.
package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func shardPod(name string) *corev1.Pod {
	return &corev1.Pod{
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "trainer",
				Image: "registry.example.com/trainer:1.0",
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("8"),
						"nvidia.com/gpu":   resource.MustParse("4"), // expect
					},
				},
			}},
		},
	}
}
