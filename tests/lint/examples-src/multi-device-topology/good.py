"""The same template, with the GPU and the NIC under one PCIe root."""
import yaml

TEMPLATE = yaml.safe_load_all(
    """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: gpu-and-nic
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly: {deviceClassName: gpu.nvidia.com}
        - name: nic
          exactly: {deviceClassName: nic.example.com}
      constraints:
        - requests: [gpu, nic]
          matchAttribute: resource.kubernetes.io/pcieRoot
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
