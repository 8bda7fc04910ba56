// A CDK program that renders a manifest from a template literal with substitutions.
const name = "trainer";
const count = 4;

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
            allocationMode: All  # expect
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
