// A controller written in TypeScript (@kubernetes/client-node) building a mixed pod spec.
import * as k8s from "@kubernetes/client-node";

export function podSpec(): k8s.V1PodSpec {
  return {
    resourceClaims: [{ name: "gpus", resourceClaimTemplateName: "four-gpus" }], // expect
    containers: [
      {
        name: "trainer",
        resources: {
          claims: [{ name: "gpus" }],
          limits: { "nvidia.com/gpu": "1" }, // expect accelerator-extended-resource
        },
      },
    ],
  };
}
