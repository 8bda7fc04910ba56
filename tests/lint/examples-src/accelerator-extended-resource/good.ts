// The cdk8s chart with a claim; a node selector label that mentions the GPU is no request.
import { Construct } from "constructs";
import * as k8s from "./imports/k8s";

export class Trainer extends Construct {
  constructor(scope: Construct, id: string) {
    super(scope, id);
    new k8s.KubeDeployment(this, "trainer", {
      spec: {
        selector: { matchLabels: { app: "trainer" } },
        template: {
          metadata: { labels: { app: "trainer" } },
          spec: {
            nodeSelector: { "nvidia.com/gpu.present": "true" },
            resourceClaims: [{ name: "gpus", resourceClaimTemplateName: "four-gpus" }],
            containers: [{
              name: "trainer",
              image: "registry.example.com/trainer:1.0",
              resources: { limits: { cpu: k8s.Quantity.fromString("8") }, claims: [{ name: "gpus" }] },
            }],
          },
        },
      },
    });
  }
}
