"""The GA model."""
from kubernetes import client

claim = client.ResourceV1ResourceClaim(
    api_version="resource.k8s.io/v1",
    kind="ResourceClaim",
    metadata=client.V1ObjectMeta(name="gpus"),
)
