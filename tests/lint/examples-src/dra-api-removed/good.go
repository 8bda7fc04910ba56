// The GA types; v1alpha3 is still served for DeviceTaintRule only, and 1.37 merely deprecates it there.
// lint: --target-release 1.35
package controllers

import (
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var claimType = metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"}

func objects() (*resourcev1.ResourceClaim, *resourcev1alpha3.DeviceTaintRule) {
	return &resourcev1.ResourceClaim{}, &resourcev1alpha3.DeviceTaintRule{}
}
