// The template with a constraint; a JSON manifest in an escaped string is read too.
package controllers

const gpuTemplate = `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: four-gpus
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
`

const oneGPU = "{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceClaim\", \"metadata\": {\"name\": \"one\"}, \"spec\": {\"devices\": {\"requests\": [{\"name\": \"gpu\", \"exactly\": {\"deviceClassName\": \"gpu.nvidia.com\"}}]}}}"
