"""A claim for the dynamic client, given a deprecated group/version."""

CLAIM = {
    "apiVersion": "resource.k8s.io/v1beta1",  # expect
    "kind": "ResourceClaim",
    "metadata": {"name": "gpus"},
}
