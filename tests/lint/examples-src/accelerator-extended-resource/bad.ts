// A cdk8s chart: the container asks for two GPUs with cdk8s's Quantity.
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
            containers: [{
              name: "trainer",
              image: "registry.example.com/trainer:1.0",
              resources: { limits: { "nvidia.com/gpu": k8s.Quantity.fromNumber(2) } }, // expect
            }],
          },
        },
      },
    });
  }
}
