// An unstructured object with a removed group/version.
package controllers

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

var claimType = metav1.TypeMeta{
	APIVersion: "resource.k8s.io/v1alpha3", // expect
	Kind:       "ResourceClaimTemplate",
}
