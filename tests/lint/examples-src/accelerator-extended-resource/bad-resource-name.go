// The resource name spelled as a typed conversion, the way client-go code often writes it.
package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func gpuLimits(n int64) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceName("amd.com/gpu"): *resource.NewQuantity(n, resource.DecimalSI), // expect
	}
}
