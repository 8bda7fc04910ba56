"""The GA version; a log line that mentions the old one is no group/version of an object."""
import logging

CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpus"}}
logging.info("migrated from resource.k8s.io/v1alpha3 to resource.k8s.io/v1")
