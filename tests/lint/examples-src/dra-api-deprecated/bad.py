"""The kubernetes client's typed model, given a deprecated group/version."""
from kubernetes import client

claim = client.V1beta1ResourceClaim(
    api_version="resource.k8s.io/v1beta1",  # expect
    kind="ResourceClaim",
    metadata=client.V1ObjectMeta(name="gpus"),
)
