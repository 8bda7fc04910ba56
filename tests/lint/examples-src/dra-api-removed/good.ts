import { ApiObject } from "cdk8s";

export function template(scope: any) {
  return new ApiObject(scope, "gpus", {
    apiVersion: "resource.k8s.io/v1",
    kind: "ResourceClaimTemplate",
    metadata: { name: "four-gpus" },
  });
}
