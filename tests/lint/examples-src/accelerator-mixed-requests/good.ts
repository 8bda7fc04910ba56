// Claims only.
import * as k8s from "@kubernetes/client-node";

export function podSpec(): k8s.V1PodSpec {
  return {
    resourceClaims: [{ name: "gpus", resourceClaimTemplateName: "four-gpus" }],
    containers: [{ name: "trainer", resources: { claims: [{ name: "gpus" }], limits: { memory: "64Gi" } } }],
  };
}
