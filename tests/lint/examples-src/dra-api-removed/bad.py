"""Creating a claim through the dynamic client with a removed version."""

CLAIM = {
    "apiVersion": "resource.k8s.io/v1alpha3",  # expect
    "kind": "ResourceClaim",
    "metadata": {"name": "gpus"},
}
