// The v1beta1 typed client: deprecated since 1.35, gone in 1.38.
package controllers

import (
	resourcev1beta1 "k8s.io/client-go/kubernetes/typed/resource/v1beta1" // expect
)

func client(c resourcev1beta1.ResourceV1beta1Interface) resourcev1beta1.ResourceClaimInterface {
	return c.ResourceClaims("default")
}
