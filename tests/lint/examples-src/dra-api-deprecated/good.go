// The same client, linted for a release before v1beta1 was deprecated.
// lint: --target-release 1.34
package controllers

import (
	resourcev1beta1 "k8s.io/client-go/kubernetes/typed/resource/v1beta1"
)

func client(c resourcev1beta1.ResourceV1beta1Interface) resourcev1beta1.ResourceClaimInterface {
	return c.ResourceClaims("default")
}
