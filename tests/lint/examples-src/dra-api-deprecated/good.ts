import * as k8s from "@pulumi/kubernetes";

export const gpus = new k8s.apiextensions.CustomResource("gpus", {
  apiVersion: "resource.k8s.io/v1",
  kind: "ResourceClaimTemplate",
  metadata: { name: "four-gpus" },
});
