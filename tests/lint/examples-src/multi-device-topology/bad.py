"""A kopf operator that creates a claim template from a triple-quoted YAML string."""
import yaml

TEMPLATE = yaml.safe_load_all(
    """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: gpu-and-nic
spec:
  spec:
    devices:  # expect
      requests:
        - name: gpu
          exactly: {deviceClassName: gpu.nvidia.com}
        - name: nic
          exactly: {deviceClassName: nic.example.com}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.nvidia.com
spec:
  selectors:
    - cel:
        expression: device.driver == "gpu.nvidia.com"
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: nic.example.com
spec:
  selectors:
    - cel:
        expression: device.driver == "dra.net"
"""
)
