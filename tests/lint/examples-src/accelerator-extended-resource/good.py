"""The handler with a claim; the toleration's key is a taint, not a request."""
from kubernetes import client


def shard_pod(name: str) -> client.V1Pod:
    container = client.V1Container(
        name="trainer",
        resources=client.V1ResourceRequirements(limits={"cpu": "8"}, claims=[client.CoreV1ResourceClaim(name="gpus")]),
    )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            containers=[container],
            resource_claims=[client.V1PodResourceClaim(name="gpus", resource_claim_template_name="four-gpus")],
            tolerations=[client.V1Toleration(key="nvidia.com/gpu", operator="Exists")],
        ),
    )
