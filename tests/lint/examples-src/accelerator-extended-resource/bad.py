"""A kopf handler that creates a pod per shard with the kubernetes client."""
from kubernetes import client


def shard_pod(name: str) -> client.V1Pod:
    resources = client.V1ResourceRequirements(
        limits={"nvidia.com/gpu": "4"},  # expect
    )
    container = client.V1Container(name="trainer", image="registry.example.com/trainer:1.0", resources=resources)
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name), spec=client.V1PodSpec(containers=[container]))
