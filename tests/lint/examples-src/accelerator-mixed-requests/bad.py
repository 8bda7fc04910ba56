"""A pod spec built with the kubernetes client that mixes a claim and a TPU extended resource."""
from kubernetes import client

spec = client.V1PodSpec(
    resource_claims=[client.V1PodResourceClaim(name="nic", resource_claim_template_name="one-nic")],  # expect
    containers=[
        client.V1Container(
            name="trainer",
            resources=client.V1ResourceRequirements(limits={"google.com/tpu": "1"}),  # expect accelerator-extended-resource
        )
    ],
)
