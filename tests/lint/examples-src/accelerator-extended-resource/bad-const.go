// A typed constant naming the accelerator, used as a resource list key elsewhere.
package controllers

import corev1 "k8s.io/api/core/v1"

const tpuResource corev1.ResourceName = "google.com/tpu" // expect

var limits = corev1.ResourceList{tpuResource: q}
