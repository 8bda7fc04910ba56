const name = "trainer";

export const manifest = `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: ${name}-gpus
spec:
  spec:
    devices:
      requests:
        - name: gpus
          exactly:
            deviceClassName: gpu.nvidia.com
            count: 4
      constraints:
        - requests: [gpus]
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
`;
