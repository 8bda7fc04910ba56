// A controller still on the v1alpha3 client types: the API server stopped serving them in 1.34.
package controllers

import (
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3" // expect
)

func claim() *resourcev1alpha3.ResourceClaim {
	return &resourcev1alpha3.ResourceClaim{}
}
