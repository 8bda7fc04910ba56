// A Pulumi program: quantities are plain strings.
import * as k8s from "@pulumi/kubernetes";

export const job = new k8s.batch.v1.Job("trainer", {
  spec: {
    template: {
      spec: {
        restartPolicy: "Never",
        containers: [{
          name: "trainer",
          image: "registry.example.com/trainer:1.0",
          resources: {
            requests: { cpu: "4" },
            limits: { 'habana.ai/gaudi': "1" }, // expect
          },
        }],
      },
    },
  },
});
