// A Pulumi CustomResource on v1beta2 (deprecated since 1.36).
import * as k8s from "@pulumi/kubernetes";

export const gpus = new k8s.apiextensions.CustomResource("gpus", {
  apiVersion: "resource.k8s.io/v1beta2", // expect
  kind: "ResourceClaimTemplate",
  metadata: { name: "four-gpus" },
});
