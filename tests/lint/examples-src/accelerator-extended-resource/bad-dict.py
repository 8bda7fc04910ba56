"""The same pod as a plain dict, the way kopf handlers often build their children."""


def shard_pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "trainer",
                    "resources": {"requests": {"aws.amazon.com/neuron": 2}},  # expect
                }
            ]
        },
    }
