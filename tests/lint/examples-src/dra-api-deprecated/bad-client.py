"""The kubernetes client's v1beta1 API class: the group/version is in the name."""
from kubernetes import client


def claims(namespace: str) -> object:
    api = client.ResourceV1beta1Api()  # expect
    return api.list_namespaced_resource_claim(namespace)


def again(namespace: str) -> object:
    return client.ResourceV1beta1Api().list_namespaced_resource_claim(namespace)  # reported once per file
